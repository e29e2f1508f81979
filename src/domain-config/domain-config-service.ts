import path from 'node:path';
import type { SecurityCompliance } from '../config.ts';
import type { ChangeTopic } from '../events/change-topics.ts';
import type { DomainConfigGroups, DomainIdentityConfigSource } from '../identity/domain-identity-config.ts';
import { DEFAULT_DOMAIN_ID, type ResourceService } from '../resource/resource-service.ts';
import type { Store } from '../store/database.ts';
import { ForbiddenError, NotFoundError, ValidationError } from '../support/errors.ts';
import { readDomainConfigFiles, watchDomainConfigFiles, type DomainConfigFile } from './domain-config-files.ts';
import { isSensitive, isSupportedGroup, isWhitelisted, READABLE_SECURITY_COMPLIANCE, WHITELISTED_OPTIONS } from './domain-config-options.ts';
import { DomainConfigRepository, type StoredOption } from './domain-config-repository.ts';

interface Logger {
  warn(object: object, message: string): void;
  error(object: object, message: string): void;
}

/** What tells the service that a domain's configuration (or a domain) may have changed, here or on another node. */
export interface ChangeFeed {
  onChange(topics: readonly ChangeTopic[], listener: () => void): () => void;
}

export interface DomainConfigServiceOptions {
  /** DOMAIN_CONFIG_DIR: operators' `keystone.<domain name>.conf` files (undefined: none). */
  directory?: string | undefined;
  /** The two `security_compliance` options anyone may read for the default domain. */
  securityCompliance: Pick<SecurityCompliance, 'passwordRegex' | 'passwordRegexDescription'>;
  log: Logger;
}

/** A config answer: groups of options, or (for one option) the option alone. */
export type ConfigAnswer = Record<string, unknown>;

/** A domain's configuration groups, a group or an option: what a request names. */
interface Selection {
  group?: string | undefined;
  option?: string | undefined;
}

/** The caches and back ends follow these: a domain's configuration, and domains (a file names its domain). */
const WATCHED: readonly ChangeTopic[] = ['domain-config', 'resource', 'resource-added'];

/**
 * Keystone's domain configuration (DomainConfigManager): each domain's own `identity` and `ldap`
 * options, from the API (stored in the database) or from an operator's file in DOMAIN_CONFIG_DIR. A
 * file-configured domain is read-only through the API. Also the source of per-domain identity back
 * ends: a synchronous map of every configured domain, rebuilt whenever a configuration or a domain
 * changes on any node (change topics), with a listener per changed domain.
 */
export class DomainConfigService implements DomainIdentityConfigSource {
  private readonly repository = new DomainConfigRepository();
  private files: DomainConfigFile[] = [];
  /** File-configured domains, by domain id. */
  private fileDomains: ReadonlyMap<string, DomainConfigFile> = new Map();
  private current: ReadonlyMap<string, DomainConfigGroups> = new Map();
  private readonly listeners = new Set<(domainId: string) => void>();
  /** Files already reported as naming no domain (reported once, not at every rebuild). */
  private readonly unmatchedReported = new Set<string>();
  private rebuilding: Promise<void> | undefined;
  private rebuildAgain = false;
  private stopWatching: (() => void) | undefined;
  private stopFileWatch: (() => void) | undefined;

  constructor(
    private readonly store: Store,
    private readonly resources: ResourceService,
    private readonly options: DomainConfigServiceOptions,
  ) {}

  /** Reads DOMAIN_CONFIG_DIR and the stored configurations, then follows `changes` and the files. */
  async start(changes?: ChangeFeed): Promise<void> {
    await this.loadFiles();
    await this.refresh();
    this.stopWatching = changes?.onChange(WATCHED, () => void this.refresh());
    const directory = this.options.directory;
    if (directory) this.stopFileWatch = watchDomainConfigFiles(directory, () => void this.reloadFiles(), this.options.log);
  }

  stop(): void {
    this.stopWatching?.();
    this.stopWatching = undefined;
    this.stopFileWatch?.();
    this.stopFileWatch = undefined;
  }

  // ---- DomainIdentityConfigSource ----------------------------------------------------------

  configured(): ReadonlyMap<string, DomainConfigGroups> {
    return this.current;
  }

  onChange(listener: (domainId: string) => void): void {
    this.listeners.add(listener);
  }

  /** Reads DOMAIN_CONFIG_DIR again (at start, and when its files change: the directory is watched). */
  async reloadFiles(): Promise<void> {
    await this.loadFiles();
    await this.refresh();
  }

  /**
   * Rebuilds the map of configured domains from the database and the files, and tells the
   * listeners which domains changed. Calls while one runs are folded into one more run after it.
   */
  refresh(): Promise<void> {
    if (this.rebuilding) {
      this.rebuildAgain = true;
      return this.rebuilding;
    }
    const run = async () => {
      try {
        do {
          this.rebuildAgain = false;
          await this.rebuild();
        } while (this.rebuildAgain);
      } finally {
        this.rebuilding = undefined;
      }
    };
    this.rebuilding = run();
    return this.rebuilding;
  }

  // ---- the API -----------------------------------------------------------------------------

  /** GET: the domain's configuration, a group or an option (sensitive options never). */
  async getConfig(domainId: string, selection: Selection = {}): Promise<ConfigAnswer> {
    assertValidGroupAndOption(selection);
    const options = (await this.optionsOf(domainId)).filter((entry) => !entry.sensitive && selects(selection, entry));
    if (options.length === 0) throw NotFoundError.domainConfig(domainId, described(selection));
    return answerOf(options, selection.option);
  }

  /** GET of the `security_compliance` group: the default domain's password rules, for anyone. */
  securityComplianceConfig(domainId: string, option?: string): ConfigAnswer {
    if (domainId !== DEFAULT_DOMAIN_ID) {
      throw ForbiddenError.invalidDomainConfig('Reading security compliance information for any domain other than the default domain is not allowed or supported.');
    }
    if (option !== undefined && !READABLE_SECURITY_COMPLIANCE.includes(option)) {
      throw ForbiddenError.invalidDomainConfig('Reading security compliance values other than password_regex and password_regex_description is not allowed.');
    }
    const regex = this.options.securityCompliance.passwordRegex;
    const values: Record<string, unknown> = {
      // Keystone's own text: the service keeps it wrapped to anchor it at the start.
      password_regex: regex ? regex.source.replace(/^\^\(\?:/, '').replace(/\)$/, '') : null,
      password_regex_description: this.options.securityCompliance.passwordRegexDescription ?? null,
    };
    if (option !== undefined) return { [option]: values[option] };
    return { security_compliance: values };
  }

  /**
   * PUT: the domain's whole configuration (replacing any it had, as Keystone does). `created` when
   * it had none. The answer holds no sensitive option.
   */
  async createConfig(domainId: string, config: unknown): Promise<{ config: ConfigAnswer; created: boolean }> {
    const result = await this.store.transaction(async (em) => {
      await this.resources.getDomain(domainId, em);
      this.refuseFileDomain(domainId);
      const options = optionsOf(config);
      await this.repository.lock(em, domainId);
      const before = await this.repository.list(em, domainId);
      await this.repository.delete(em, domainId);
      await this.repository.write(em, domainId, options);
      return { config: answerOf(options.filter((entry) => !entry.sensitive)), created: before.length === 0 };
    });
    await this.refresh();
    return result;
  }

  /**
   * PATCH: merges options into the configuration; with a group (or an option) only that group (or
   * option), which must already be there. Answers the whole configuration, as Keystone does.
   */
  async updateConfig(domainId: string, config: unknown, selection: Selection = {}): Promise<ConfigAnswer> {
    const { group, option } = selection;
    await this.store.transaction(async (em) => {
      await this.resources.getDomain(domainId, em);
      this.refuseFileDomain(domainId);
      // For one option the body names the option alone: it is that group's.
      const update = group !== undefined && option !== undefined ? { [group]: config } : config;
      const options = optionsOf(update);
      assertValidGroupAndOption(selection);
      const groups = update as Record<string, Record<string, unknown>>;
      if (group !== undefined) {
        if (Object.keys(groups).length !== 1 || (option !== undefined && Object.keys(groups[group] ?? {}).length !== 1)) {
          throw ForbiddenError.invalidDomainConfig(
            option !== undefined
              ? `Trying to update option ${option} in group ${group}, so that, and only that, option must be specified  in the config`
              : `Trying to update group ${group}, so that, and only that, group must be specified in the config`,
          );
        }
        if (!Object.hasOwn(groups, group)) {
          throw ForbiddenError.invalidDomainConfig(`request to update group ${group}, but config provided contains group ${Object.keys(groups)[0]} instead`);
        }
        if (option !== undefined && !Object.hasOwn(groups[group]!, option)) {
          throw ForbiddenError.invalidDomainConfig(
            `Trying to update option ${option} in group ${group}, but config provided contains option ${Object.keys(groups[group]!)[0]} instead`,
          );
        }
      }
      await this.repository.lock(em, domainId);
      if (group !== undefined) {
        const existing = (await this.repository.list(em, domainId)).filter((entry) => selects(selection, entry));
        if (existing.length === 0) throw NotFoundError.domainConfig(domainId, described(selection));
      }
      await this.repository.write(em, domainId, options);
    });
    await this.refresh();
    // Keystone answers with a read after the write: a configuration of sensitive options only is a 404 (once written).
    return this.getConfig(domainId);
  }

  /** DELETE: the whole configuration (none is no error), a group or an option (which must be there). */
  async deleteConfig(domainId: string, selection: Selection = {}): Promise<void> {
    const { group, option } = selection;
    await this.store.transaction(async (em) => {
      await this.resources.getDomain(domainId, em);
      this.refuseFileDomain(domainId);
      assertValidGroupAndOption(selection);
      await this.repository.lock(em, domainId);
      if (group !== undefined) {
        const inGroup = (await this.repository.list(em, domainId)).filter((entry) => entry.group === group);
        if (inGroup.length === 0) throw NotFoundError.domainConfig(domainId, described({ group }));
        // Keystone looks the option's value up and finds "nothing" in an empty one too.
        if (option !== undefined && !truthy(inGroup.find((entry) => entry.option === option)?.value)) {
          throw NotFoundError.domainConfig(domainId, described(selection));
        }
      }
      await this.repository.delete(em, domainId, group, option);
    });
    await this.refresh();
  }

  /** GET …/default: Keystone's defaults of every allowed option, a group's, or one option's. */
  defaultConfig(selection: Selection = {}): ConfigAnswer {
    const { group, option } = selection;
    assertValidGroupAndOption(selection);
    if (group !== undefined && option !== undefined) {
      if (!isWhitelisted(group, option)) throw ForbiddenError.invalidDomainConfig(`Reading the default for option ${option} in group ${group} is not supported`);
      return { [option]: WHITELISTED_OPTIONS[group]![option] };
    }
    if (group !== undefined) return { [group]: { ...WHITELISTED_OPTIONS[group] } };
    return Object.fromEntries(Object.entries(WHITELISTED_OPTIONS).map(([name, options]) => [name, { ...options }]));
  }

  // ---- internals ---------------------------------------------------------------------------

  private refuseFileDomain(domainId: string): void {
    const file = this.fileDomains.get(domainId);
    if (file) throw ForbiddenError.domainConfiguredByFile(domainId, path.basename(file.file));
  }

  /** A domain's options: its file's when it has one, else the stored ones. */
  private async optionsOf(domainId: string): Promise<StoredOption[]> {
    const file = this.fileDomains.get(domainId);
    if (file) return optionsOfGroups(file.groups);
    return this.repository.list(this.store.reader(), domainId);
  }

  private async loadFiles(): Promise<void> {
    this.files = this.options.directory ? await readDomainConfigFiles(this.options.directory, this.options.log) : [];
    this.unmatchedReported.clear();
  }

  private async rebuild(): Promise<void> {
    let stored: Map<string, StoredOption[]>;
    const fileDomains = new Map<string, DomainConfigFile>();
    try {
      stored = await this.repository.listAll(this.store.reader());
      for (const file of this.files) {
        const domain = await this.resources.findDomainByName(file.domainName);
        if (domain) {
          fileDomains.set(domain.id, file);
          this.unmatchedReported.delete(file.file);
        } else if (!this.unmatchedReported.has(file.file)) {
          this.unmatchedReported.add(file.file);
          this.options.log.warn({ file: file.file, domain: file.domainName }, 'domain configuration file skipped: no domain has this name');
        }
      }
    } catch (error) {
      // The database cannot be read now: the configurations in force stay; the next change tries again.
      this.options.log.error({ reason: error instanceof Error ? error.message : 'query failed' }, 'could not read the domain configurations');
      return;
    }
    const next = new Map<string, DomainConfigGroups>();
    for (const [domainId, options] of stored) if (!fileDomains.has(domainId)) next.set(domainId, withSubstitutions(options));
    for (const [domainId, file] of fileDomains) next.set(domainId, file.groups);
    const changed = new Set<string>();
    for (const id of new Set([...this.current.keys(), ...next.keys()])) {
      if (JSON.stringify(this.current.get(id)) !== JSON.stringify(next.get(id))) changed.add(id);
    }
    this.current = next;
    this.fileDomains = fileDomains;
    for (const domainId of changed) {
      for (const listener of this.listeners) {
        try {
          listener(domainId);
        } catch (error) {
          this.options.log.error({ domainId, reason: error instanceof Error ? error.message : 'failed' }, 'a domain configuration listener failed');
        }
      }
    }
  }
}

// ---- validation, Keystone's order and words ---------------------------------------------------

function invalid(reason: string): ForbiddenError {
  return ForbiddenError.invalidDomainConfig(reason);
}

/** Python's truth of a JSON value (Keystone tests `not value`). */
function truthy(value: unknown): boolean {
  if (value === null || value === undefined || value === false || value === 0 || value === '') return false;
  if (Array.isArray(value)) return value.length > 0;
  if (typeof value === 'object') return Object.keys(value).length > 0;
  return true;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function assertValidGroupAndOption({ group, option }: Selection): void {
  if (group === undefined) return;
  if (!isSupportedGroup(group)) throw invalid(`Group ${group} is not supported for domain specific configurations`);
  if (option !== undefined && !isWhitelisted(group, option) && !isSensitive(group, option)) {
    throw invalid(`Option ${option} in group ${group} is not supported for domain specific configurations`);
  }
}

/** A request's `config`, checked as Keystone does, as the options to store. */
function optionsOf(config: unknown): StoredOption[] {
  if (!truthy(config)) throw invalid('No options specified');
  // Keystone fails on these in Python itself (a 400 with the interpreter's words for a string).
  if (typeof config === 'string') throw new ValidationError("string indices must be integers, not 'str'");
  if (!isObject(config)) throw ValidationError.field('config', 'it must be an object of groups of options.');
  const options: StoredOption[] = [];
  for (const [group, values] of Object.entries(config)) {
    if (!isObject(values) || Object.keys(values).length === 0) throw invalid(`The value of group ${group} specified in the config should be a dictionary of options`);
    for (const [option, value] of Object.entries(values)) {
      assertValidGroupAndOption({ group, option });
      options.push({ group, option, value, sensitive: isSensitive(group, option) });
    }
  }
  return options;
}

function selects({ group, option }: Selection, entry: StoredOption): boolean {
  return (group === undefined || entry.group === group) && (option === undefined || entry.option === option);
}

/** Keystone's words for what was not found. */
function described({ group, option }: Selection): string {
  if (option !== undefined) return `option ${option} in group ${group}`;
  if (group !== undefined) return `group ${group}`;
  return 'any options';
}

/** Groups of options; for one option requested, that option alone. */
function answerOf(options: readonly StoredOption[], option?: string): ConfigAnswer {
  if (option !== undefined) return { [option]: options[0]?.value ?? null };
  const groups: Record<string, Record<string, unknown>> = {};
  for (const entry of options) (groups[entry.group] ??= {})[entry.option] = entry.value;
  return groups;
}

function optionsOfGroups(groups: DomainConfigGroups): StoredOption[] {
  return Object.entries(groups).flatMap(([group, values]) =>
    Object.entries(values).map(([option, value]) => ({ group, option, value, sensitive: isSensitive(group, option) })),
  );
}

/**
 * The whole configuration a back end needs (sensitive options included), with Keystone's
 * substitution of `%(password)s`-style references to sensitive options in string values.
 */
function withSubstitutions(options: readonly StoredOption[]): DomainConfigGroups {
  const sensitive = new Map(options.filter((entry) => entry.sensitive).map((entry) => [entry.option, entry.value]));
  const groups: DomainConfigGroups = {};
  for (const entry of options) {
    let value = entry.value;
    if (!entry.sensitive && typeof value === 'string' && sensitive.size) {
      value = value.replace(/%\((\w+)\)s/g, (reference, name: string) => (sensitive.has(name) ? String(sensitive.get(name)) : reference));
    }
    (groups[entry.group] ??= {})[entry.option] = value;
  }
  return groups;
}
