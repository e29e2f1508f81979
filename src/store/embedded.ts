import fs from 'node:fs';
import path from 'node:path';
import type { Extension, PGlite } from '@electric-sql/pglite';
import type { PGLiteSocketServer } from '@electric-sql/pglite-socket';

export class DataDirectoryLockedError extends Error {
  override name = 'DataDirectoryLockedError';
}

export interface EmbeddedPostgres {
  /** A postgres:// URL the ordinary PostgreSQL driver connects to. */
  url: string;
  close(): Promise<void>;
}

/**
 * WebAssembly memories for PGlite to run in, kept between the embedded databases one process opens
 * and closes (a test file opens several). PGlite zero-fills 141 MB of shared memory at every start
 * (its shared_buffers is compiled in; it reads no postgresql.conf), and each page of a new memory
 * costs a fault at its first touch, ~20 µs on some virtual machines: most of a start. A memory given
 * back is zeroed and used again, its pages already there. Only for databases that are closed before
 * the next one takes the memory back; the service itself opens one and needs none.
 */
export class EmbeddedMemoryPool {
  readonly #free: WebAssembly.Memory[] = [];

  take(): WebAssembly.Memory {
    const memory = this.#free.pop();
    if (!memory) return new WebAssembly.Memory({ initial: EMSCRIPTEN_INITIAL_PAGES, maximum: EMSCRIPTEN_MAXIMUM_PAGES });
    // A fresh start expects zeroed memory (static data and the heap), as a new memory is.
    new Uint8Array(memory.buffer).fill(0);
    return memory;
  }

  give(memory: WebAssembly.Memory): void {
    this.#free.push(memory);
  }
}

// What PGlite's build creates itself when given no memory: 16 MB to start, 2 GB at most (64 KB pages).
const EMSCRIPTEN_INITIAL_PAGES = 256;
const EMSCRIPTEN_MAXIMUM_PAGES = 32768;

/**
 * Runs PGlite in this process and serves it on a loopback port, so the same PostgreSQL driver and
 * migrations work for the embedded default and for a real server.
 */
export async function startEmbeddedPostgres(directory: string | 'memory', options: { memoryPool?: EmbeddedMemoryPool } = {}): Promise<EmbeddedPostgres> {
  const releaseLock = directory === 'memory' ? () => {} : acquireLock(directory);
  let db: PGlite | undefined;
  let server: PGLiteSocketServer | undefined;
  const memory = options.memoryPool?.take();
  try {
    // Loaded only for the embedded database: a service on PostgreSQL never holds PGlite's code.
    const [{ PGlite }, { PGLiteSocketServer }] = await Promise.all([import('@electric-sql/pglite'), import('@electric-sql/pglite-socket')]);
    if (directory !== 'memory') fs.mkdirSync(directory, { recursive: true, mode: 0o700 });
    db = new PGlite(directory === 'memory' ? undefined : directory, memory ? { extensions: { memory: runsIn(memory) } } : {});
    await db.waitReady;
    // A few connections so a reconnect never waits for a stale socket; PGlite queues their queries.
    server = new PGLiteSocketServer({ db, host: '127.0.0.1', port: 0, maxConnections: 4 });
    await server.start();
  } catch (error) {
    await server?.stop().catch(() => {});
    await db?.close().catch(() => {});
    releaseLock();
    throw error;
  }
  const runningServer = server;
  const runningDb = db;
  return {
    url: `postgres://postgres@${runningServer.getServerConn()}/postgres`,
    async close() {
      await runningServer.stop();
      await runningDb.close();
      releaseLock();
      if (memory) options.memoryPool?.give(memory);
    },
  };
}

/**
 * A PGlite extension that only hands its Emscripten module the memory to run in (`wasmMemory`, which
 * the module uses instead of creating one): extensions are PGlite's way to add module options.
 */
function runsIn(memory: WebAssembly.Memory): Extension {
  return { name: 'memory', setup: async (_pg, emscriptenOptions) => ({ emscriptenOpts: { ...emscriptenOptions, wasmMemory: memory } }) };
}

/** One process per PGlite directory: two would corrupt it. A lock left by a dead process is taken over. */
function acquireLock(directory: string): () => void {
  const lockFile = `${directory.replace(/\/+$/, '')}.lock`;
  fs.mkdirSync(path.dirname(lockFile), { recursive: true, mode: 0o700 });
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = fs.openSync(lockFile, 'wx', 0o600);
      fs.writeSync(fd, String(process.pid));
      fs.closeSync(fd);
      return () => fs.rmSync(lockFile, { force: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const holder = Number(fs.readFileSync(lockFile, 'utf8').trim());
      if (Number.isInteger(holder) && holder > 0 && holder !== process.pid && isAlive(holder)) {
        throw new DataDirectoryLockedError(
          `the embedded database ${directory} is in use by process ${holder}; ` +
            'stop it, or give this process its own DATA_DIR (or DATABASE_URL for a shared PostgreSQL)',
        );
      }
      fs.rmSync(lockFile, { force: true });
    }
  }
  throw new DataDirectoryLockedError(`could not lock ${lockFile}`);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
