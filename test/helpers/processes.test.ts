import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { createTestDatabase, LOCAL_POSTGRES } from './database.ts';
import { freePort, PortTakenError, reservePort, startOnFreePort, startService } from './processes.ts';

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

t.test('a reserved port refuses connections, keeps other servers off, and lets a reusePort server listen', async (t) => {
  const connect = (port: number) =>
    new Promise<string>((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => {
        socket.destroy();
        resolve('connected');
      });
      socket.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
    });
  const listen = (port: number, reusePort: boolean) =>
    new Promise<net.Server>((resolve, reject) => {
      const server = net.createServer((socket) => socket.end());
      server.once('error', reject).listen({ port, host: '127.0.0.1', reusePort }, () => resolve(server));
    });
  const close = (server: net.Server) => new Promise<void>((resolve) => server.close(() => resolve()));
  const reserved = await reservePort(t);
  t.equal(await connect(reserved.port), 'ECONNREFUSED', 'nothing listens: refused, as a stopped service');
  await t.rejects(listen(reserved.port, false), { code: 'EADDRINUSE' }, 'a plain listen cannot take it');
  const server = await listen(reserved.port, true);
  t.equal(await connect(reserved.port), 'connected', 'a reusePort server listens on it');
  await close(server);
  t.equal(await connect(reserved.port), 'ECONNREFUSED', 'and when it stops, the port is still held');
  await t.rejects(listen(reserved.port, false), { code: 'EADDRINUSE' });
  await reserved.release();
  const after = await listen(reserved.port, false);
  t.pass('released: anyone can listen again');
  await close(after);
});

t.test('startOnFreePort: another port after a taken one, three tries, other failures at once', async (t) => {
  const offered: number[] = [];
  const ports = async () => {
    offered.push(1000 + offered.length);
    return offered.at(-1)!;
  };
  const tried: number[] = [];
  const result = await startOnFreePort(async (port) => {
    tried.push(port);
    if (tried.length < 3) throw new PortTakenError(`port ${port} was taken`);
    return `started on ${port}`;
  }, ports);
  t.equal(result, 'started on 1002', 'the third port');
  t.same(tried, [1000, 1001, 1002]);

  offered.length = 0;
  await t.rejects(
    startOnFreePort(async (port) => {
      throw new PortTakenError(`port ${port} was taken`);
    }, ports),
    { message: 'port 1002 was taken' },
    'the third taken port is the last try',
  );
  t.equal(offered.length, 3);

  offered.length = 0;
  await t.rejects(
    startOnFreePort(async () => {
      throw new Error('the binary is missing');
    }, ports),
    { message: 'the binary is missing' },
    'another failure is not retried',
  );
  t.equal(offered.length, 1);
});
