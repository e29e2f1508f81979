import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { Config } from '../config.ts';
import type { GatewayReplay } from '../policy/gateway-explain.ts';

// `manage policy replay --candidate DIR`: POST /v3/gateway/policy/replay on a running deployment
// with the rule files of DIR, and print which recorded requests the candidate would decide otherwise.

const OPTIONS = {
  candidate: { type: 'string' },
  url: { type: 'string' },
  limit: { type: 'string' },
  json: { type: 'boolean' },
} as const;

/**
 * Exit 0 when the replay ran (whatever it found), 1 when the deployment refused it (a candidate
 * that does not load or fails its fixtures: the message names the file and line) or cannot be
 * reached. The admin token comes from OS_TOKEN (never an argument: it would show in `ps`).
 */
export async function policyReplay(config: Config, args: string[], usage: (message: string) => Error, environment: NodeJS.ProcessEnv = process.env): Promise<number> {
  let values: { candidate?: string | undefined; url?: string | undefined; limit?: string | undefined; json?: boolean | undefined };
  try {
    values = parseArgs({ args, options: OPTIONS, allowPositionals: false, strict: true }).values;
  } catch (error) {
    throw usage(error instanceof Error ? error.message : String(error));
  }
  if (!values.candidate) throw usage('--candidate DIR is required');
  const token = environment.OS_TOKEN;
  if (!token) throw usage('OS_TOKEN must hold an admin token');
  let limit: number | undefined;
  if (values.limit !== undefined) {
    if (!/^[1-9]\d*$/.test(values.limit)) throw usage(`--limit must be a positive whole number, not '${values.limit}'`);
    limit = Number(values.limit);
  }
  const base = (values.url ?? environment.OS_AUTH_URL ?? config.publicUrl).replace(/\/+$/, '').replace(/\/v3$/, '');

  // The rule files, and the fixtures beside them (tests/*.yaml): the candidate is gated by its own.
  const files: Record<string, string> = {};
  for (const entry of (await readdir(values.candidate)).sort()) {
    if (entry.endsWith('.csv') && !entry.startsWith('.')) files[entry] = await readFile(path.join(values.candidate, entry), 'utf8');
  }
  const tests = path.join(values.candidate, 'tests');
  for (const entry of existsSync(tests) ? (await readdir(tests)).sort() : []) {
    if (/\.ya?ml$/.test(entry) && !entry.startsWith('.')) files[`tests/${entry}`] = await readFile(path.join(tests, entry), 'utf8');
  }
  if (Object.keys(files).length === 0) throw usage(`${values.candidate} holds no <service_type>.csv file`);

  let response: Response;
  try {
    response = await fetch(`${base}/v3/gateway/policy/replay`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-auth-token': token },
      body: JSON.stringify({ replay: { files, ...(limit !== undefined ? { limit } : {}) } }),
    });
  } catch (error) {
    process.stderr.write(`cannot reach ${base}: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
  const text = await response.text();
  if (response.status !== 200) {
    let message = text;
    try {
      message = (JSON.parse(text) as { error?: { message?: string } }).error?.message ?? text;
    } catch {
      // not Keystone's envelope: print as received
    }
    process.stderr.write(`replay refused (${response.status}): ${message}\n`);
    return 1;
  }
  const { replay } = JSON.parse(text) as { replay: GatewayReplay };
  if (values.json) {
    console.log(JSON.stringify(replay, null, 2));
    return 0;
  }
  console.log(`${replay.decisions} recorded decisions replayed; ${replay.changed.length} would change`);
  for (const change of replay.changed) {
    const rule = change.rule ? `${change.rule.file}:${change.rule.line}  ${change.rule.text}` : 'no rule allows';
    console.log(`  ${change.request_id}  ${change.method} ${change.path}  ${change.live} -> ${change.candidate}  (${rule})`);
  }
  return 0;
}
