import t from 'tap';
import { startTestApp, type TestApp } from '../helpers/app.ts';

// A revocation event revokes the tokens issued up to and including its second (Fernet issued_at has
// whole seconds, as in Keystone). A token issued right after the event, in the same second, must
// still be good: authentication then waits for the next second (the test clock moves itself) and
// issues a token that validates. Tokens issued before the event stay revoked.

async function world(t: { teardown(fn: () => unknown): void; equal(found: unknown, wanted: unknown): unknown }) {
  const app = await startTestApp(t);
  const { call } = app;
  const member = (await call('GET', '/v3/roles?name=member')).json().roles[0];
  const project = (await call('POST', '/v3/projects', { project: { name: 'same-second' } })).json().project;
  const user = (await call('POST', '/v3/users', { user: { name: 'same-second', password: 'Pw-1' } })).json().user;
  t.equal((await call('PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${member.id}`)).statusCode, 204);
  // Start each case at the beginning of a second, so 'the same second' holds whatever the steps do.
  app.clock.set(Math.ceil(app.clock.now() / 1000) * 1000 + 1000);
  return { app, project, user };
}

const validate = (app: TestApp, subject: string) => app.call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': subject });
const second = (iso: string) => Math.floor(Date.parse(iso) / 1000);

t.test('password changes: a token issued in the same second afterwards validates', async (t) => {
  for (const how of ['self-service change', 'admin update'] as const) {
    const { app, project, user } = await world(t);
    const scope = { project: { id: project.id } };
    const before = await app.login({ id: user.id }, 'Pw-1', scope);
    const eventSecond = Math.floor(app.clock.now() / 1000);
    const changed =
      how === 'self-service change'
        ? await app.call('POST', `/v3/users/${user.id}/password`, { user: { password: 'Pw-2', original_password: 'Pw-1' } }, before.token)
        : await app.call('PATCH', `/v3/users/${user.id}`, { user: { password: 'Pw-2' } });
    t.ok(changed.statusCode === 204 || changed.statusCode === 200, `${how}: ${changed.statusCode}`);
    t.equal(Math.floor(app.clock.now() / 1000), eventSecond, 'still the same second');
    t.equal((await validate(app, before.token)).statusCode, 404, `${how}: the token from before is revoked`);

    const after = await app.login({ id: user.id }, 'Pw-2', scope);
    t.equal(after.status, 201);
    t.equal((await validate(app, after.token)).statusCode, 200, `${how}: the token issued afterwards validates at once`);
    t.equal(second(after.body.token.issued_at), eventSecond + 1, 'it was issued in the next second');
    t.equal((await app.login({ id: user.id }, 'Pw-1', scope)).status, 401, 'the old password is refused');
  }
});

t.test('a user disabled and enabled again in one second: a new token validates', async (t) => {
  const { app, project, user } = await world(t);
  const scope = { project: { id: project.id } };
  const before = await app.login({ id: user.id }, 'Pw-1', scope);
  t.equal((await app.call('PATCH', `/v3/users/${user.id}`, { user: { enabled: false } })).statusCode, 200);
  t.equal((await app.login({ id: user.id }, 'Pw-1', scope)).status, 401, 'disabled');
  t.equal((await app.call('PATCH', `/v3/users/${user.id}`, { user: { enabled: true } })).statusCode, 200);
  t.equal((await validate(app, before.token)).statusCode, 404, 'the token from before the disable stays revoked');
  const after = await app.login({ id: user.id }, 'Pw-1', scope);
  t.equal(after.status, 201);
  t.equal((await validate(app, after.token)).statusCode, 200);
  const unscoped = await app.login({ id: user.id }, 'Pw-1', 'unscoped');
  t.equal((await validate(app, unscoped.token)).statusCode, 200, 'an unscoped token too');
  const rescoped = await app.call('POST', '/v3/auth/tokens', { auth: { identity: { methods: ['token'], token: { id: unscoped.token } }, scope } }, null);
  t.equal(rescoped.statusCode, 201);
  t.equal((await validate(app, String(rescoped.headers['x-subject-token']))).statusCode, 200, 'and one made from it by the token method');
});

t.test('application credentials: a token issued in the second of a password change validates; a credential deleted writes no event, so nothing waits', async (t) => {
  const { app, project, user } = await world(t);
  const sleep = app.clock.sleep.bind(app.clock);
  let waits = 0;
  app.clock.sleep = async (milliseconds: number) => {
    waits++;
    await sleep(milliseconds);
  };
  const session = await app.login({ id: user.id }, 'Pw-1', { project: { id: project.id } });
  const create = async (name: string, token: string) => {
    const created = await app.call('POST', `/v3/users/${user.id}/application_credentials`, { application_credential: { name } }, token);
    t.equal(created.statusCode, 201, created.body);
    const { id, secret } = created.json().application_credential;
    return { id, auth: { auth: { identity: { methods: ['application_credential'], application_credential: { id, secret } } } } };
  };
  const kept = await create('kept', session.token);
  const dropped = await create('dropped', session.token);
  const droppedToken = String((await app.call('POST', '/v3/auth/tokens', dropped.auth, null)).headers['x-subject-token']);
  t.equal((await app.call('DELETE', `/v3/users/${user.id}/application_credentials/${dropped.id}`, undefined, session.token)).statusCode, 204);
  t.equal((await validate(app, droppedToken)).statusCode, 404, "the deleted credential's token goes");
  const keptToken = await app.call('POST', '/v3/auth/tokens', kept.auth, null);
  t.equal(keptToken.statusCode, 201);
  t.equal((await validate(app, String(keptToken.headers['x-subject-token']))).statusCode, 200, 'another credential, same second: valid');
  // The deleted credential's tokens fail its lookup; no event is written, so no wait was needed.
  t.equal(waits, 0, 'no wait after a credential deletion');
  t.same((await app.call('GET', '/v3/OS-REVOKE/events')).json().events.filter((e: { user_id?: string }) => e.user_id === user.id), [], 'no event');

  t.equal((await app.call('PATCH', `/v3/users/${user.id}`, { user: { password: 'Pw-2' } })).statusCode, 200);
  t.equal((await validate(app, String(keptToken.headers['x-subject-token']))).statusCode, 404, 'a password change revokes the credential tokens issued so far');
  const afterChange = await app.call('POST', '/v3/auth/tokens', kept.auth, null);
  t.equal(afterChange.statusCode, 201);
  t.equal((await validate(app, String(afterChange.headers['x-subject-token']))).statusCode, 200, 'one issued in the same second afterwards validates');
  t.equal(waits, 1, 'after the password change event, one wait for the next second');
});

t.test('a timer that fires before the second turns: the wait is topped up, and the token validates', async (t) => {
  const { app, project, user } = await world(t);
  const scope = { project: { id: project.id } };
  t.equal((await app.call('PATCH', `/v3/users/${user.id}`, { user: { enabled: false } })).statusCode, 200);
  t.equal((await app.call('PATCH', `/v3/users/${user.id}`, { user: { enabled: true } })).statusCode, 200);
  // The first wait ends 1 ms early (setTimeout may fire before the wall clock's second turns).
  const sleep = app.clock.sleep.bind(app.clock);
  const waits: number[] = [];
  app.clock.sleep = async (milliseconds: number) => {
    waits.push(milliseconds);
    await sleep(waits.length === 1 ? milliseconds - 1 : milliseconds);
  };
  const issued = await app.login({ id: user.id }, 'Pw-1', scope);
  t.equal(issued.status, 201);
  t.equal(waits.length, 2, 'waited again');
  t.equal(waits[1], 1, 'for the last millisecond');
  t.equal((await validate(app, issued.token)).statusCode, 200);
});

t.test('another matching event in the next second as well: 401, never a token that will not validate', async (t) => {
  const { app, project, user } = await world(t);
  const scope = { project: { id: project.id } };
  const reenable = async () => {
    t.equal((await app.call('PATCH', `/v3/users/${user.id}`, { user: { enabled: false } })).statusCode, 200);
    t.equal((await app.call('PATCH', `/v3/users/${user.id}`, { user: { enabled: true } })).statusCode, 200);
  };
  await reenable();
  // While authentication waits for the next second, the user is disabled and enabled again in it.
  const sleep = app.clock.sleep.bind(app.clock);
  let waits = 0;
  app.clock.sleep = async (milliseconds: number) => {
    waits++;
    await sleep(milliseconds);
    await reenable();
  };
  const refused = await app.login({ id: user.id }, 'Pw-1', scope);
  t.equal(waits, 1, 'one wait for the next second');
  t.equal(refused.status, 401);
  app.clock.sleep = sleep;
  const later = await app.login({ id: user.id }, 'Pw-1', scope);
  t.equal(later.status, 201);
  t.equal((await validate(app, later.token)).statusCode, 200);
});
