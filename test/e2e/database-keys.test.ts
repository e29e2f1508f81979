import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { builtService } from '../helpers/build.ts';
import { createTestDatabase, LOCAL_POSTGRES } from '../helpers/database.ts';
import { ROOT, startService, waitFor } from '../helpers/processes.ts';

const ADMIN_PASSWORD = 'database-keys-admin-secret';
const run = promisify(execFile);

// Two service processes with their own data directories (no key files to copy) sharing PostgreSQL
// and KEY_ENCRYPTION_KEY, no Redis: `manage fernet_rotate` on the side reaches both by polling.
t.test('keys in the database: rotation from the manage CLI reaches every node without a restart', async (t) => {
  // Each teardown right after what it undoes (tap runs them last first), so a failed start leaves nothing running.
  const database = await createTestDatabase(process.env.TEST_DATABASE_URL || LOCAL_POSTGRES);
  t.teardown(() => database.drop());
  const randomKek = randomBytes(32).toString('base64');
  const directories = [0, 1, 2, 3].map(() => fs.mkdtempSync(path.join(os.tmpdir(), 'kg-e2e-keys-')));
  t.teardown(() => {
    for (const directory of directories) fs.rmSync(directory, { recursive: true, force: true });
  });
  const environment = (directory: string) => ({
    DATABASE_URL: database.url!,
    ADMIN_PASSWORD,
    DATA_DIR: directory,
    KEY_ENCRYPTION_KEY: randomKek,
    KEY_RELOAD_INTERVAL_MS: '200',
    SECRET_PEPPER: 'a-pepper-every-node-of-this-test-shares-0123456789',
    AUTH_RATE_LIMIT_PER_ADDRESS: '0',
    AUTH_RATE_LIMIT_PER_USER: '0',
  });
  const nodeA = await startService(environment(directories[0]!));
  t.teardown(() => nodeA.stop());
  const nodeB = await startService(environment(directories[1]!));
  t.teardown(() => nodeB.stop());

  const auth = JSON.stringify({ auth: { identity: { methods: ['password'], password: { user: { name: 'admin', domain: { id: 'default' }, password: ADMIN_PASSWORD } } } } });
  const issue = async (url: string) => {
    const response = await fetch(`${url}/v3/auth/tokens`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: auth });
    t.equal(response.status, 201);
    return response.headers.get('x-subject-token')!;
  };
  const validate = async (url: string, subject: string, caller: string) =>
    (await fetch(`${url}/v3/auth/tokens`, { headers: { 'x-auth-token': caller, 'x-subject-token': subject } })).status;

  const first = await issue(nodeA.url);
  t.equal(await validate(nodeB.url, first, first), 200, "A's token validates on B: the same keys, never copied");
  t.notOk(fs.existsSync(path.join(directories[0]!, 'fernet-keys')), 'no key files');

  for (let rotation = 0; rotation < 2; rotation++) {
    const rotated = await run(process.execPath, [...(await builtService()).manage, 'fernet_rotate'], {
      cwd: ROOT,
      env: { ...process.env, ...environment(directories[2]!), REDIS_URL: '', TEST_DATABASE_URL: '' },
    });
    t.match(rotated.stdout, /rotated the fernet keys in the database/);
  }
  // Two rotations with FERNET_MAX_ACTIVE_KEYS=3: the first primary is gone, on both nodes.
  await waitFor(async () => {
    const fresh = await issue(nodeA.url);
    return (await validate(nodeA.url, first, fresh)) === 404 && (await validate(nodeB.url, first, fresh)) === 404;
  }, 'both nodes to load the rotated keys', 15_000);
  const fresh = await issue(nodeA.url);
  t.equal(await validate(nodeB.url, fresh, fresh), 200, "A's token of the new primary validates on B");
  t.equal(await validate(nodeA.url, await issue(nodeB.url), fresh), 200, "and B's on A");
  t.equal((await fetch(`${nodeB.url}/readyz`)).status, 200);

  // A node with another KEY_ENCRYPTION_KEY stops at start, naming it.
  const refused = await startService({ ...environment(directories[3]!), KEY_ENCRYPTION_KEY: randomBytes(32).toString('base64') }).then(
    async (started) => {
      await started.stop();
      return 'started';
    },
    (error: Error) => error.message,
  );
  t.match(refused, /keystone-gateway: the fernet token keys in the database do not decrypt with KEY_ENCRYPTION_KEY/);
  t.notMatch(refused, /failed to start/, 'a message, not a stack trace');
});
