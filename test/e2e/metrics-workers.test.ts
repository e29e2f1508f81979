import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { createTestDatabase, LOCAL_POSTGRES } from '../helpers/database.ts';
import { serviceWorkers, startService, waitFor } from '../helpers/processes.ts';

/** One GET on a connection of its own, so the primary hands it to the next worker. */
function get(url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent: false }, (response) => {
        let body = '';
        response.on('data', (chunk: Buffer) => (body += chunk.toString()));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
      })
      .on('error', reject);
  });
}

/** The sum of a series over every worker label. */
function sumOverWorkers(text: string, series: RegExp): number {
  let total = 0;
  for (const line of text.split('\n')) if (series.test(line)) total += Number(line.slice(line.lastIndexOf(' ') + 1));
  return total;
}

t.test('WORKERS=2: a scrape on any worker answers every worker, each series labelled', async (t) => {
  const database = await createTestDatabase(process.env.TEST_DATABASE_URL || LOCAL_POSTGRES);
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-metrics-workers-'));
  const service = await startService({ DATABASE_URL: database.url!, WORKERS: '2', ADMIN_PASSWORD: 'metrics-admin', DATA_DIR: directory }, { startTimeoutMs: 60_000 });
  t.teardown(async () => {
    await service.stop();
    await database.drop();
    fs.rmSync(directory, { recursive: true, force: true });
  });
  await waitFor(async () => serviceWorkers(service.child.pid!).length === 2, 'two workers', 60_000);
  // Both workers listening: each has answered a request of its own.
  await waitFor(async () => {
    const scrape = await get(`${service.url}/metrics`);
    return /process_start_time_seconds\{worker="\d+"\}[^\n]*\n[\s\S]*process_start_time_seconds\{worker="\d+"\}/.test(scrape.body);
  }, 'both workers in one scrape', 60_000);

  const before = await get(`${service.url}/metrics`);
  const discovery = /^keystone_gateway_http_requests_total\{worker="\d+",face="identity",route="\/v3",method="GET",decision="allowed",status_class="2xx"\} /;
  const counted = sumOverWorkers(before.body, discovery);
  // The primary hands each new connection to a worker that is free; a busy machine can make one
  // worker take several in a row: send until both have served (at most 60), counting what was sent.
  const servedBy = (body: string) => new Set([...body.matchAll(/keystone_gateway_http_requests_total\{worker="(\d+)",face="identity",route="\/v3",/g)].map((match) => match[1]));
  let sent = 0;
  let after = before;
  while (sent < 60 && (sent < 6 || servedBy(after.body).size < 2)) {
    for (let index = 0; index < 6; index++, sent++) t.equal((await get(`${service.url}/v3`)).status, 200);
    after = await get(`${service.url}/metrics`);
  }
  t.equal(after.status, 200);
  t.equal(sumOverWorkers(after.body, discovery) - counted, sent, 'every request counted once, whichever worker served it');
  const workers = new Set([...after.body.matchAll(/worker="(\d+)"/g)].map((match) => match[1]));
  t.equal(workers.size, 2, 'series of both workers');
  t.equal(after.body.split('\n').filter((line) => line === '# TYPE keystone_gateway_http_requests_total counter').length, 1, 'HELP and TYPE once per metric');
  t.equal(servedBy(after.body).size, 2, 'requests on fresh connections reached both workers');
});
