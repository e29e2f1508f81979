import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { builtService, runsBuiltService } from './build.ts';

export const ROOT = path.resolve(import.meta.dirname, '../..');

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

/** A start's port was taken before it could bind it: startOnFreePort tries another. */
export class PortTakenError extends Error {}

/**
 * `start` on a port from `ports` (freePort() by default), again on another while it throws
 * PortTakenError (3 tries in all). A port chosen before the bind can be taken meanwhile: tap runs
 * files at once, and an outgoing connection's local port comes from the same range (seen in CI as
 * EADDRINUSE). Whatever a failed try started, `start` stops before it throws.
 */
export async function startOnFreePort<T>(start: (port: number) => Promise<T>, ports: () => Promise<number> = freePort): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const port = await ports();
    try {
      return await start(port);
    } catch (error) {
      if (attempt < 3 && error instanceof PortTakenError) continue;
      throw error;
    }
  }
}

export interface ServiceProcess {
  url: string;
  child: ChildProcess;
  output(): string;
  stop(): Promise<void>;
}

// A service start takes seconds of CPU (migrations, bootstrap); with tap running four files at once
// on two cores it has taken over 30 s.
async function waitFor(check: () => Promise<boolean>, what: string, timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/**
 * Starts the service as its own process (the bundle, as `npm start` runs it: test/helpers/build.ts)
 * and waits until it answers.
 * One process unless the environment sets WORKERS (the default would fork one worker per core).
 */
export async function startService(environment: Record<string, string>, options: StartOptions = {}): Promise<ServiceProcess> {
  return startOnFreePort((port) => startServiceOn(port, environment, options), options.ports);
}

interface StartOptions {
  startTimeoutMs?: number;
  /** Where the port comes from (a test of the retry gives a taken one first). */
  ports?: () => Promise<number>;
}

async function startServiceOn(port: number, environment: Record<string, string>, options: StartOptions): Promise<ServiceProcess> {
  const child = spawn(process.execPath, (await builtService()).service, {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: 'warn', PASSWORD_HASH_ROUNDS: '4', WORKERS: '1', ...environment, PORT: String(port), HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 5000))]);
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  };
  const closed = new Promise((resolve) => child.once('close', resolve));
  try {
    // A process that exits ends the wait at once (waitFor takes a throwing check for "not yet").
    // (Each check bounded: whatever took the port may accept and never answer.)
    await waitFor(async () => child.exitCode !== null || (await fetch(`${url}/v3`, { signal: AbortSignal.timeout(2000) })).status === 200, `the service on ${url}`, options.startTimeoutMs);
    if (child.exitCode !== null) {
      await closed;
      if (output.includes(`listen EADDRINUSE: address already in use 127.0.0.1:${port}`)) throw new PortTakenError(`port ${port} was taken`);
      throw new Error(`service exited: ${output}`);
    }
  } catch (error) {
    await stop();
    if (error instanceof PortTakenError) throw error;
    throw new Error(`${(error as Error).message}\n${output}`);
  }
  return { url, child, output: () => output, stop };
}

/** A private redis-server the test may stop (never the machine's shared one). */
export async function startRedis(): Promise<{ url: string; stop(): Promise<void> }> {
  return startOnFreePort(async (port) => {
    const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
    // A port taken meanwhile makes redis-server exit (and another process would answer on it), so
    // the wait also watches the child.
    await waitFor(
      () =>
        child.exitCode !== null
          ? Promise.resolve(true)
          : new Promise<boolean>((resolve) => {
              const socket = net.connect(port, '127.0.0.1', () => {
                socket.end();
                resolve(true);
              });
              socket.on('error', () => resolve(false));
            }),
      'redis-server',
    );
    if (child.exitCode !== null) throw new PortTakenError(`redis-server exited (${child.exitCode}) on port ${port}`);
    return redisProcess(child, port);
  });
}

function redisProcess(child: ChildProcess, port: number): { url: string; stop(): Promise<void> } {
  return {
    url: `redis://127.0.0.1:${port}`,
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Live child processes of `pid` running the service (cluster workers), from /proc. */
export function serviceWorkers(pid: number): number[] {
  const workers: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      // Field 4 (ppid) follows the command name, which may contain spaces: split after the last ')'.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[1]) !== pid || fields[0] === 'Z') continue;
      if (runsBuiltService(fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8'))) workers.push(Number(entry));
    } catch {
      // Gone while we looked.
    }
  }
  return workers.sort((a, b) => a - b);
}

export { waitFor };

/**
 * Takes `port` the way an outgoing connection does (bound, connected, not listening, and without
 * SO_REUSEADDR, which node's own sockets always set): a check for listeners sees the port free, and a
 * server's bind then fails with EADDRINUSE. What CI's ports were taken by. Released at teardown.
 */
export async function holdPortByConnection(t: { teardown(fn: () => unknown): void }, port: number): Promise<void> {
  const target = net.createServer((socket) => socket.on('error', () => undefined));
  await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', () => resolve()));
  t.teardown(() => new Promise((resolve) => target.close(resolve)));
  const targetPort = (target.address() as net.AddressInfo).port;
  await socketHolder(t, [`s.bind(('127.0.0.1', ${port}))`, `s.connect(('127.0.0.1', ${targetPort}))`, 'print("held", flush=True)'], `holding port ${port}`);
}

/**
 * A python process holding a socket set up by `lines` (`s` is the socket; the last line prints
 * what the caller reads) until it is released, at teardown at the latest. Node cannot make such
 * sockets: its own always set SO_REUSEADDR, and it cannot bind without listening.
 */
async function socketHolder(t: { teardown(fn: () => unknown): void }, lines: string[], what: string): Promise<{ printed: string; release(): Promise<void> }> {
  const program = ['import socket, sys', 's = socket.socket()', ...lines, 'sys.stdin.read()'].join('\n');
  const holder = spawn('python3', ['-c', program], { stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = new Promise<void>((resolve) => holder.once('close', () => resolve()).once('error', () => resolve()));
  const release = async () => {
    holder.stdin?.end();
    await exited;
  };
  t.teardown(release);
  const printed = await new Promise<string>((resolve, reject) => {
    holder.stdout?.once('data', (data: Buffer) => resolve(String(data).trim()));
    holder.once('error', reject);
    holder.once('exit', (code) => reject(new Error(`the port holder exited (${code}) before ${what}`)));
  });
  return { printed, release };
}

export interface ReservedPort {
  port: number;
  /** Gives the port up (at teardown too). */
  release(): Promise<void>;
}

/**
 * A port no other process can take while a test's server is down on it: a socket bound to it and
 * never listening (so connections are refused, as to a stopped service), with SO_REUSEPORT only. A
 * server that also sets it (`listen({ reusePort: true })`) can listen on the port meanwhile; a
 * plain listen, and the kernel's choice of a local port for a connection, cannot take it. For a
 * test that stops and restarts a server on the same port.
 */
export async function reservePort(t: { teardown(fn: () => unknown): void }): Promise<ReservedPort> {
  const holder = await socketHolder(
    t,
    ['s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)', "s.bind(('127.0.0.1', 0))", 'print(s.getsockname()[1], flush=True)'],
    'reserving a port',
  );
  return { port: Number(holder.printed), release: holder.release };
}

/** The PIDs of the processes listening on 127.0.0.1:`port` (or any address), from `ss`. */
export function listenerPids(port: number): number[] {
  const listeners = execFileSync('ss', ['-Hltnp', `sport = :${port}`], { encoding: 'utf8' });
  return [...listeners.matchAll(/pid=(\d+),/g)].map((match) => Number(match[1]));
}

/**
 * A port source for tests of a start's retry: first a port held by a connection (holdPortByConnection),
 * then free ones; `offered` lists what it gave.
 */
export async function takenPortFirst(t: { teardown(fn: () => unknown): void }): Promise<{ taken: number; offered: number[]; ports: () => Promise<number> }> {
  const taken = await freePort();
  await holdPortByConnection(t, taken);
  const offered: number[] = [];
  const ports = async () => {
    const port = offered.length === 0 ? taken : await freePort();
    offered.push(port);
    return port;
  };
  return { taken, offered, ports };
}
