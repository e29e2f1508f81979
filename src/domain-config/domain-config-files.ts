import { watch } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { DomainConfigGroups } from '../identity/domain-identity-config.ts';
import { isSensitive, isWhitelisted, WHITELISTED_OPTIONS } from './domain-config-options.ts';

interface Logger {
  warn(object: object, message: string): void;
}

// Names whose change can alter the domain files; '..data' is the symlink a Kubernetes ConfigMap swaps.
const RELEVANT = /^keystone\..+\.conf$|^\.\.data$/;

/** A domain's configuration read from `keystone.<domain name>.conf` in DOMAIN_CONFIG_DIR. */
export interface DomainConfigFile {
  /** The domain's name, from the file name. */
  domainName: string;
  file: string;
  groups: DomainConfigGroups;
}

const FILE_NAME = /^keystone\.(.+)\.conf$/;

/**
 * Reads every `keystone.<domain name>.conf` of `directory` (Keystone's domain_config_dir). An
 * unreadable file, a group or option Keystone does not allow in a domain configuration, is logged
 * and skipped: a bad file never stops the service.
 */
export async function readDomainConfigFiles(directory: string, log: Logger): Promise<DomainConfigFile[]> {
  let names: string[];
  try {
    names = (await readdir(directory)).sort();
  } catch (error) {
    log.warn({ directory, reason: (error as NodeJS.ErrnoException).code ?? 'unreadable' }, 'DOMAIN_CONFIG_DIR cannot be read: no domain is configured by a file');
    return [];
  }
  const files: DomainConfigFile[] = [];
  for (const name of names) {
    const domainName = FILE_NAME.exec(name)?.[1];
    if (domainName === undefined) continue;
    const file = path.join(directory, name);
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (error) {
      log.warn({ file, reason: (error as NodeJS.ErrnoException).code ?? 'unreadable' }, 'domain configuration file skipped: it cannot be read');
      continue;
    }
    const groups = domainConfigOfIni(text, (group, option) => log.warn({ file, group, option }, 'domain configuration file: option skipped (not allowed in a domain configuration)'));
    if (Object.keys(groups).length === 0) {
      log.warn({ file }, 'domain configuration file skipped: it sets no option of [identity] or [ldap]');
      continue;
    }
    files.push({ domainName, file, groups });
  }
  return files;
}

/**
 * The `[identity]` and `[ldap]` options of an oslo.config INI text, typed as Keystone's options are
 * (a boolean, number or list where the option's default is one). Other groups and options go to
 * `skipped`.
 */
export function domainConfigOfIni(text: string, skipped: (group: string, option: string) => void = () => {}): DomainConfigGroups {
  const groups: DomainConfigGroups = {};
  let group: string | undefined;
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const section = /^\[([^\]]+)\]$/.exec(line);
    if (section) {
      group = section[1]!.trim();
      continue;
    }
    const separator = line.search(/[=:]/);
    if (separator <= 0 || group === undefined) continue;
    const option = line.slice(0, separator).trim();
    if (!isWhitelisted(group, option) && !isSensitive(group, option)) {
      skipped(group, option);
      continue;
    }
    (groups[group] ??= {})[option] = typed(line.slice(separator + 1).trim(), WHITELISTED_OPTIONS[group]?.[option]);
  }
  return groups;
}

/** A value as the option's type (its default's): oslo.config's booleans, integers, floats and lists. */
function typed(value: string, byDefault: unknown): unknown {
  if (typeof byDefault === 'boolean') {
    const lower = value.toLowerCase();
    if (['true', '1', 'yes', 'on'].includes(lower)) return true;
    if (['false', '0', 'no', 'off'].includes(lower)) return false;
    return value;
  }
  if (typeof byDefault === 'number' && value !== '' && Number.isFinite(Number(value))) return Number(value);
  if (Array.isArray(byDefault)) return value === '' ? [] : value.split(',').map((item) => item.trim());
  return value;
}

/**
 * Calls `changed` once the files of `directory` stop changing for `debounceMs` (a file added, edited
 * or removed); returns a function that stops watching. A directory that cannot be watched is logged.
 */
export function watchDomainConfigFiles(directory: string, changed: () => void, log: Logger, debounceMs = 100): () => void {
  let timer: NodeJS.Timeout | undefined;
  try {
    const watcher = watch(directory, { persistent: false }, (_event, filename) => {
      if (filename !== null && !RELEVANT.test(String(filename))) return;
      clearTimeout(timer);
      timer = setTimeout(changed, debounceMs);
      timer.unref();
    });
    watcher.on('error', (error) => log.warn({ directory, reason: error.message }, 'DOMAIN_CONFIG_DIR watch failed: its files are read again only at a restart'));
    watcher.unref();
    return () => {
      clearTimeout(timer);
      watcher.close();
    };
  } catch (error) {
    log.warn({ directory, reason: error instanceof Error ? error.message : 'unwatchable' }, 'DOMAIN_CONFIG_DIR cannot be watched: its files are read again only at a restart');
    return () => {};
  }
}
