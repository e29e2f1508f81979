import fs from 'node:fs';
import path from 'node:path';
import type { PGlite } from '@electric-sql/pglite';
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
 * Runs PGlite in this process and serves it on a loopback port, so the same PostgreSQL driver and
 * migrations work for the embedded default and for a real server.
 */
export async function startEmbeddedPostgres(directory: string | 'memory'): Promise<EmbeddedPostgres> {
  const releaseLock = directory === 'memory' ? () => {} : acquireLock(directory);
  let db: PGlite | undefined;
  let server: PGLiteSocketServer | undefined;
  try {
    // Loaded only for the embedded database: a service on PostgreSQL never holds PGlite's code.
    const [{ PGlite }, { PGLiteSocketServer }] = await Promise.all([import('@electric-sql/pglite'), import('@electric-sql/pglite-socket')]);
    if (directory !== 'memory') fs.mkdirSync(directory, { recursive: true, mode: 0o700 });
    db = new PGlite(directory === 'memory' ? undefined : directory);
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
    },
  };
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
