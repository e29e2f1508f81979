import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { builtService } from '../helpers/build.ts';
import { createTestDatabase, LOCAL_POSTGRES } from '../helpers/database.ts';
import { ROOT, serviceWorkers, startService } from '../helpers/processes.ts';

const ADMIN_PASSWORD = 'workers-admin-secret';

t.test('without DATABASE_URL, WORKERS is ignored: one process on the embedded database', async (t) => {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-workers-pglite-'));
  const service = await startService({ WORKERS: '2', ADMIN_PASSWORD, DATA_DIR: directory }, { startTimeoutMs: 60_000 });
  t.teardown(async () => {
    await service.stop();
    fs.rmSync(directory, { recursive: true, force: true });
  });
  t.match(service.output(), /WORKERS=2 ignored: the embedded database runs in one process/);
  t.same(serviceWorkers(service.child.pid!), [], 'no worker processes');
  t.equal((await fetch(`${service.url}/readyz`)).status, 200);
  const exited = new Promise<number | null>((resolve) => service.child.once('exit', (code) => resolve(code)));
  service.child.kill('SIGTERM');
  t.equal(await exited, 0);
});

t.test('a worker that cannot start stops the service instead of restarting in a loop', async (t) => {
  const database = await createTestDatabase(process.env.TEST_DATABASE_URL || LOCAL_POSTGRES);
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-workers-taken-'));
  const taken = net.createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  t.teardown(async () => {
    await new Promise((resolve) => taken.close(resolve));
    await database.drop();
    fs.rmSync(directory, { recursive: true, force: true });
  });
  const port = (taken.address() as net.AddressInfo).port;
  const child = spawn(process.execPath, (await builtService()).service, {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: database.url!, WORKERS: '2', ADMIN_PASSWORD, DATA_DIR: directory, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn', PASSWORD_HASH_ROUNDS: '4' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', (exitCode) => resolve(exitCode)));
  t.equal(code, 1, 'the primary exits with 1');
  t.match(output, /EADDRINUSE/, 'the worker says why');
  t.match(output, /a worker exited while starting/);
  t.notMatch(output, /starting a replacement/);
});
