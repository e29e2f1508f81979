import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { createTestDatabase, LOCAL_POSTGRES } from './database.ts';
import { startService, type ServiceProcess } from './processes.ts';

/**
 * The service with WORKERS=2 on a PostgreSQL database of its own (no REDIS_URL: the workers reach
 * each other through the primary), logging at info; stopped and its database dropped at teardown.
 * A primary and two workers each load the whole application: slow on a busy machine.
 */
export async function startTwoWorkers(t: { teardown(fn: () => unknown): void }, name: string, settings: Record<string, string>): Promise<ServiceProcess> {
  const database = await createTestDatabase(process.env.TEST_DATABASE_URL || LOCAL_POSTGRES);
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), `kg-${name}-`));
  const service = await startService({ DATABASE_URL: database.url!, WORKERS: '2', DATA_DIR: directory, LOG_LEVEL: 'info', ...settings }, { startTimeoutMs: 60_000 });
  t.teardown(async () => {
    await service.stop();
    await database.drop();
    fs.rmSync(directory, { recursive: true, force: true });
  });
  return service;
}

/** One request on a connection of its own, so the primary hands it to the next worker. */
export function callOnOwnConnection(
  url: string,
  options: { method?: string; token?: string; subject?: string; body?: unknown } = {},
): Promise<{ status: number; headers: http.IncomingHttpHeaders; token: string; body: any }> {
  const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
  return new Promise((resolve, reject) => {
    const request = http.request(
      url,
      {
        method: options.method ?? 'GET',
        agent: false,
        headers: {
          ...(payload === undefined ? {} : { 'content-type': 'application/json' }),
          ...(options.token ? { 'x-auth-token': options.token } : {}),
          ...(options.subject ? { 'x-subject-token': options.subject } : {}),
        },
      },
      (response) => {
        let text = '';
        response.on('data', (chunk: Buffer) => (text += chunk.toString()));
        response.on('end', () =>
          resolve({ status: response.statusCode ?? 0, headers: response.headers, token: String(response.headers['x-subject-token'] ?? ''), body: text ? JSON.parse(text) : undefined }),
        );
      },
    );
    request.on('error', reject);
    request.end(payload);
  });
}

/** Pids of the processes that logged a line `matching` since `from` in `output` (pino puts the pid on every line). */
export function pidsLogging(output: string, matching: (line: string) => boolean, from = 0): Set<number> {
  const pids = new Set<number>();
  for (const line of output.slice(from).split('\n')) if (matching(line)) pids.add(Number(/"pid":(\d+)/.exec(line)?.[1]));
  return pids;
}
