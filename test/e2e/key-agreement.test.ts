import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { createTestDatabase, LOCAL_POSTGRES } from '../helpers/database.ts';
import { startService } from '../helpers/processes.ts';

const ADMIN_PASSWORD = 'key-agreement-admin-secret';

// The outside probe's set-up: two nodes on one DATABASE_URL, neither with KEY_ENCRYPTION_KEY nor
// SECRET_PEPPER, each with its own DATA_DIR. The second must not run split from the first.
t.test('a second node with keys and pepper of its own stops at start, naming KEY_ENCRYPTION_KEY and SECRET_PEPPER', async (t) => {
  const database = await createTestDatabase(process.env.TEST_DATABASE_URL || LOCAL_POSTGRES);
  const directories = [0, 1].map(() => fs.mkdtempSync(path.join(os.tmpdir(), 'kg-e2e-agree-')));
  const environment = (directory: string) => ({ DATABASE_URL: database.url!, ADMIN_PASSWORD, DATA_DIR: directory, PASSWORD_HASH_ROUNDS: '4' });
  const nodeA = await startService(environment(directories[0]!));
  t.teardown(async () => {
    await nodeA.stop();
    await database.drop();
    for (const directory of directories) fs.rmSync(directory, { recursive: true, force: true });
  });

  // With workers, as a node runs by default on PostgreSQL: the primary refuses before forking.
  const refused = await startService({ ...environment(directories[1]!), WORKERS: '2' }).then(
    async (started) => {
      await started.stop();
      return 'started';
    },
    (error: Error) => error.message,
  );
  t.match(
    refused,
    /keystone-gateway: the other nodes sharing DATABASE_URL use different fernet token keys than this node's, from \S+fernet-keys \(tokens issued by one node would be refused by the other\) and a different SECRET_PEPPER/,
  );
  t.match(refused, /the same KEY_ENCRYPTION_KEY/);
  t.notMatch(refused, /failed to start/, 'a message, not a stack trace');
  t.notMatch(refused, fs.readFileSync(path.join(directories[1]!, 'secret-pepper'), 'utf8').trim(), 'no pepper in the message');
  t.equal((await fetch(`${nodeA.url}/readyz`)).status, 200, 'the first node is unaffected');
});
