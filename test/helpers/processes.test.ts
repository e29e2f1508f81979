import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { createTestDatabase, LOCAL_POSTGRES } from './database.ts';
import { freePort, startService } from './processes.ts';

t.test('a service whose port was taken before it could bind it is started on another', async (t) => {
  // What CI saw: freePort()'s port taken by another process before the service listened (EADDRINUSE).
  const squatter = net.createServer();
  await new Promise<void>((resolve) => squatter.listen(0, '127.0.0.1', () => resolve()));
  t.teardown(() => squatter.close());
  const taken = (squatter.address() as net.AddressInfo).port;
  const offered: number[] = [];
  const ports = async () => {
    const port = offered.length === 0 ? taken : await freePort();
    offered.push(port);
    return port;
  };
  const database = await createTestDatabase(process.env.TEST_DATABASE_URL || LOCAL_POSTGRES);
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-port-taken-'));
  const service = await startService({ DATABASE_URL: database.url!, ADMIN_PASSWORD: 'port-taken-admin', DATA_DIR: directory }, { startTimeoutMs: 60_000, ports });
  t.teardown(async () => {
    await service.stop();
    await database.drop();
    fs.rmSync(directory, { recursive: true, force: true });
  });
  t.equal(offered.length, 2, 'a second port was asked for');
  t.equal(offered[0], taken);
  t.equal(service.url, `http://127.0.0.1:${offered[1]}`, 'the service listens on the second');
  t.equal((await fetch(`${service.url}/v3`)).status, 200);
});
