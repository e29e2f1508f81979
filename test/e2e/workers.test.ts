import t from 'tap';
import { serviceWorkers, waitFor } from '../helpers/processes.ts';
import { callOnOwnConnection, pidsLogging, startTwoWorkers } from '../helpers/workers.ts';

const ADMIN_PASSWORD = 'workers-admin-secret';

const call = callOnOwnConnection;

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Pids of the processes that logged a completed request since `from`. */
const servingPids = (output: string, from = 0) => pidsLogging(output, (line) => line.includes('"msg":"request completed"'), from);

t.test('WORKERS=2 with PostgreSQL: two workers share the port, the database and each other’s changes', async (t) => {
  // No REDIS_URL: the workers hear of each other's changes through the primary.
  const service = await startTwoWorkers(t, 'workers', { ADMIN_PASSWORD });
  const primary = service.child.pid!;
  // The listening log line and the login hint are separate writes: wait for the hint itself.
  await waitFor(async () => service.output().includes('Log in as admin'), 'every worker to listen and the login hint', 60_000);
  t.equal(service.output().split('Log in as admin').length, 2, 'the login hint is printed once');
  t.equal(service.output().split('bootstrap: created user admin').length, 2, 'bootstrap ran once');
  const workers = serviceWorkers(primary);
  t.equal(workers.length, 2, 'two worker processes under the primary');

  const adminAuth = { auth: { identity: { methods: ['password'], password: { user: { name: 'admin', domain: { id: 'default' }, password: ADMIN_PASSWORD } } }, scope: { system: { all: true } } } };
  const admin = (await call(`${service.url}/v3/auth/tokens`, { method: 'POST', body: adminAuth })).token;
  t.ok(admin, 'admin token issued');
  for (let index = 0; index < 6; index++) {
    t.equal((await call(`${service.url}/v3/auth/tokens`, { token: admin, subject: admin })).status, 200, `validates on connection ${index + 1}`);
  }
  const served = servingPids(service.output());
  t.same([...served].sort((a, b) => a - b), workers, 'both workers served requests, the primary none');

  // A revocation through one worker reaches the other's cache (relayed by the primary).
  const member = (await call(`${service.url}/v3/roles?name=member`, { token: admin })).body.roles[0];
  const project = (await call(`${service.url}/v3/projects`, { method: 'POST', token: admin, body: { project: { name: 'workers' } } })).body.project;
  const user = (await call(`${service.url}/v3/users`, { method: 'POST', token: admin, body: { user: { name: 'shared', password: 'Pw-1' } } })).body.user;
  t.equal((await call(`${service.url}/v3/projects/${project.id}/users/${user.id}/roles/${member.id}`, { method: 'PUT', token: admin })).status, 204);
  const userAuth = { auth: { identity: { methods: ['password'], password: { user: { id: user.id, password: 'Pw-1' } } }, scope: { project: { id: project.id } } } };
  const token = (await call(`${service.url}/v3/auth/tokens`, { method: 'POST', body: userAuth })).token;
  for (let index = 0; index < 4; index++) t.equal((await call(`${service.url}/v3/auth/tokens`, { token: admin, subject: token })).status, 200, 'valid, and cached by both');
  t.equal((await call(`${service.url}/v3/auth/tokens`, { method: 'DELETE', token: admin, subject: token })).status, 204);
  await waitFor(async () => {
    const statuses = await Promise.all([0, 1, 2, 3].map(() => call(`${service.url}/v3/auth/tokens`, { token: admin, subject: token })));
    return statuses.every((response) => response.status === 404);
  }, 'every worker to refuse the revoked token', 2000);
  t.pass('every worker refuses the revoked token');

  // A worker that dies is replaced; the service keeps answering meanwhile.
  const [victim, survivor] = workers as [number, number];
  const beforeKill = service.output().length;
  process.kill(victim, 'SIGKILL');
  await waitFor(async () => service.output().includes('worker died unexpectedly'), 'the primary to notice', 10_000);
  for (let index = 0; index < 4; index++) t.equal((await call(`${service.url}/v3`)).status, 200, 'answered with one worker down');
  await waitFor(async () => serviceWorkers(primary).length === 2, 'a replacement worker', 30_000);
  const replacement = serviceWorkers(primary).find((pid) => pid !== survivor)!;
  t.not(replacement, victim);
  await waitFor(async () => new RegExp(`"pid":${replacement},[^\\n]*"msg":"Server listening`).test(service.output().slice(beforeKill)), 'the replacement to listen', 60_000);
  const afterRestart = service.output().length;
  // The workers' log lines reach the primary's output a moment after their answers: keep asking
  // until the replacement's show up (each answer must still be 200).
  const statuses: number[] = [];
  await waitFor(async () => {
    statuses.push((await call(`${service.url}/v3/auth/tokens`, { token: admin, subject: admin })).status);
    return statuses.length >= 6 && servingPids(service.output(), afterRestart).has(replacement);
  }, 'the replacement to serve requests', 20_000);
  t.ok(statuses.every((status) => status === 200), 'every validation answered 200 meanwhile');
  t.pass('the replacement serves requests');

  // SIGTERM to the primary: the workers drain and exit, then the primary, with status 0.
  const exited = new Promise<number | null>((resolve) => service.child.once('exit', (code) => resolve(code)));
  service.child.kill('SIGTERM');
  t.equal(await exited, 0, 'the primary exits with 0');
  t.notOk(isAlive(survivor) || isAlive(replacement), 'no worker outlives the primary');
});
