import fs from 'node:fs';
import t from 'tap';
import { ADMIN_PASSWORD, PUBLIC_URL, startTestApp } from '../helpers/app.ts';
import { call, passwordAuth } from '../helpers/keystone-client.ts';
import { dropUncomparedTokenFields, PEER_PASSWORD, PEER_URL, peerUp } from '../helpers/keystone-peer.ts';

// OS-TRUST over HTTP, against this service and against the real Keystone 22 (../shared/peers/keystone/start.sh;
// that half is skipped without a peer): the same requests, the same statuses, the same messages, the
// same bodies (ids, times and audit ids named or dropped).

interface Seen {
  status: number;
  /** The error message (of a schema failure, its first line), or the body. */
  said: unknown;
}

async function scenario(base: string, adminPassword: string, linkBase = base): Promise<Record<string, Seen>> {
  const prefix = `tr-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const login = await call(`${base}/v3/auth/tokens`, {
    method: 'POST',
    body: passwordAuth({ name: 'admin', domainId: 'default' }, adminPassword, { project: { name: 'admin', domain: { id: 'default' } } }),
  });
  if (login.status !== 201) throw new Error(`admin login: ${login.status}`);
  const admin = login.token;
  const names = new Map<string, string>();
  const name = (id: string, as: string) => {
    names.set(id, as);
    return id;
  };
  const named = (text: string) => [...names].reduce((result, [id, as]) => result.replaceAll(id, as), text.replaceAll(prefix, '~').replaceAll(linkBase, 'BASE'));
  const seen: Record<string, Seen> = {};
  const record = <A extends { status: number; body: any }>(step: string, answer: A): A => {
    const error = answer.body?.error as { message: string } | undefined;
    let said: unknown = null;
    // A schema failure: its first line (Keystone goes on with the schema and the instance).
    if (error) said = named(error.message.split('\n')[0]!);
    else if (answer.body) {
      const body = structuredClone(answer.body);
      if (body.token) {
        dropUncomparedTokenFields(body.token);
        // Keystone adds the implied roles through a Python set: in no fixed order.
        body.token.roles?.sort((a: { name: string }, b: { name: string }) => a.name.localeCompare(b.name));
      }
      // A list on a shared peer also shows others' trusts: only this run's.
      if (Array.isArray(body.trusts)) body.trusts = body.trusts.filter((trust: { id: string }) => names.has(trust.id));
      said = JSON.parse(named(JSON.stringify(body)));
    }
    seen[step] = { status: answer.status, said };
    return answer;
  };
  const ask = async (step: string, method: string, path: string, token: string, body?: unknown) =>
    record(step, await call(`${base}${path}`, { method, token, ...(body === undefined ? {} : { body }) }));
  const api = (method: string, path: string, body?: unknown) => call(`${base}${path}`, { method, token: admin, ...(body === undefined ? {} : { body }) });
  const users: string[] = [];
  let project = '';
  try {
    project = name((await api('POST', '/v3/projects', { project: { name: `${prefix}-p`, domain_id: 'default' } })).body.project.id, 'PROJ');
    const password = `Pw-${prefix}-1a!`;
    const user = async (as: string) => {
      const id = name((await api('POST', '/v3/users', { user: { name: `${prefix}-${as}`, domain_id: 'default', password } })).body.user.id, as.toUpperCase());
      users.push(id);
      return id;
    };
    const trustor = await user('trustor');
    const trustee = await user('trustee');
    const stranger = await user('stranger');
    const roleId = async (role: string) => name(((await api('GET', `/v3/roles?name=${role}`)).body.roles as { id: string }[])[0]!.id, role.toUpperCase());
    const member = await roleId('member');
    const reader = await roleId('reader');
    await roleId('admin');
    await api('PUT', `/v3/projects/${project}/users/${trustor}/roles/${member}`);
    const tokenOf = async (id: string, scope?: unknown) => {
      const answer = await call(`${base}/v3/auth/tokens`, { method: 'POST', body: passwordAuth({ id }, password, scope) });
      if (answer.status !== 201) throw new Error(`login: ${answer.status} ${JSON.stringify(answer.body)}`);
      return answer.token;
    };
    const trustorToken = await tokenOf(trustor, { project: { id: project } });
    const trusteeToken = await tokenOf(trustee);
    const strangerToken = await tokenOf(stranger);
    const trustBody = (trust: Record<string, unknown>) => ({ trust: { trustor_user_id: trustor, trustee_user_id: trustee, project_id: project, impersonation: false, ...trust } });
    const create = (step: string, trust: Record<string, unknown>, token = trustorToken) => ask(step, 'POST', '/v3/OS-TRUST/trusts', token, trustBody(trust));
    const trustScoped = (step: string, trustId: string, user = trustee) =>
      call(`${base}/v3/auth/tokens?nocatalog`, {
        method: 'POST',
        body: { auth: { identity: { methods: ['password'], password: { user: { id: user, password } } }, scope: { 'OS-TRUST:trust': { id: trustId } } } },
      }).then((answer) => record(step, answer));

    const created = await create('create', { roles: [{ name: 'reader' }], remaining_uses: 2 });
    const trust = name(created.body.trust.id, 'TRUST');
    record('create', created);
    await ask('get as trustee', 'GET', `/v3/OS-TRUST/trusts/${trust}`, trusteeToken);
    await ask('get as stranger', 'GET', `/v3/OS-TRUST/trusts/${trust}`, strangerToken);
    await ask('get missing', 'GET', '/v3/OS-TRUST/trusts/no-such-trust', strangerToken);
    await ask('list for trustor', 'GET', `/v3/OS-TRUST/trusts?trustor_user_id=${trustor}`, trustorToken);
    await ask('list for trustee', 'GET', `/v3/OS-TRUST/trusts?trustee_user_id=${trustee}`, trusteeToken);
    await ask('list for trustor as trustee', 'GET', `/v3/OS-TRUST/trusts?trustor_user_id=${trustor}`, trusteeToken);
    await ask('list all as trustor', 'GET', '/v3/OS-TRUST/trusts', trustorToken);
    await ask('roles', 'GET', `/v3/OS-TRUST/trusts/${trust}/roles`, trusteeToken);
    await ask('role', 'GET', `/v3/OS-TRUST/trusts/${trust}/roles/${reader}`, trusteeToken);
    await ask('role not delegated', 'GET', `/v3/OS-TRUST/trusts/${trust}/roles/${member}`, trusteeToken);

    const extra = await create('create with an extra attribute', { roles: [{ name: 'reader' }], colour: 'blue' });
    if (extra.status === 201) {
      name(extra.body.trust.id, 'TRUST-EXTRA');
      record('create with an extra attribute', extra);
      await ask('get with an extra attribute', 'GET', `/v3/OS-TRUST/trusts/${extra.body.trust.id}`, trustorToken);
      await ask('delete with an extra attribute', 'DELETE', `/v3/OS-TRUST/trusts/${extra.body.trust.id}`, trustorToken);
    }
    await create('expired', { roles: [{ name: 'reader' }], expires_at: '2020-01-01T00:00:00Z' });
    await create('bad expiry', { roles: [{ name: 'reader' }], expires_at: 'garbage' });
    await create('no roles', {});
    await create('role not held', { roles: [{ name: 'admin' }] });
    await create('unknown role name', { roles: [{ name: `${prefix}-none` }] });
    await create('unknown role id', { roles: [{ id: 'nope' }] });
    await create('no uses', { roles: [{ name: 'reader' }], remaining_uses: 0 });
    await create('unknown trustee', { roles: [{ name: 'reader' }], trustee_user_id: 'nouser' });
    await create('unknown project', { roles: [{ name: 'reader' }], project_id: 'noproj' });
    await create('too deep', { roles: [{ name: 'reader' }], allow_redelegation: true, redelegation_count: 5 });
    await create('admin for another trustor', { roles: [{ name: 'reader' }] }, admin);
    await ask('no impersonation', 'POST', '/v3/OS-TRUST/trusts', trustorToken, { trust: { trustor_user_id: trustor, trustee_user_id: trustee, project_id: project, roles: [{ name: 'reader' }] } });

    const issued = await trustScoped('trust token', trust);
    await trustScoped('trust token as trustor', trust, trustor);
    await ask('rescope a trust token', 'POST', '/v3/auth/tokens', '', { auth: { identity: { methods: ['token'], token: { id: issued.token } }, scope: { project: { id: project } } } });
    await trustScoped('last use', trust);
    await trustScoped('no use left', trust);
    await ask('trust used up', 'GET', `/v3/OS-TRUST/trusts/${trust}`, trustorToken);
    record('validate after the last use', await call(`${base}/v3/auth/tokens?nocatalog`, { token: admin, subject: issued.token }));

    const impersonating = await create('create impersonating', { roles: [{ id: member }], impersonation: true, allow_redelegation: true });
    name(impersonating.body.trust.id, 'TRUST2');
    record('create impersonating', impersonating);
    const asTrustor = await trustScoped('impersonating token', impersonating.body.trust.id);
    const redelegated = await ask('redelegate', 'POST', '/v3/OS-TRUST/trusts', asTrustor.token, trustBody({ roles: [{ id: member }], impersonation: true }));
    if (redelegated.status === 201) {
      name(redelegated.body.trust.id, 'TRUST3');
      record('redelegate', redelegated);
    }
    await ask('redelegate with uses', 'POST', '/v3/OS-TRUST/trusts', asTrustor.token, trustBody({ roles: [{ id: member }], impersonation: true, remaining_uses: 1 }));
    await ask('delete as trustee', 'DELETE', `/v3/OS-TRUST/trusts/${impersonating.body.trust.id}`, trusteeToken);
    await ask('delete', 'DELETE', `/v3/OS-TRUST/trusts/${impersonating.body.trust.id}`, trustorToken);
    await ask('delete again', 'DELETE', `/v3/OS-TRUST/trusts/${impersonating.body.trust.id}`, trustorToken);
    record('validate after delete', await call(`${base}/v3/auth/tokens?nocatalog`, { token: admin, subject: asTrustor.token }));
  } finally {
    for (const user of users) await api('DELETE', `/v3/users/${user}`);
    if (project) {
      await api('PATCH', `/v3/projects/${project}`, { project: { enabled: false } });
      await api('DELETE', `/v3/projects/${project}`);
    }
  }
  return seen;
}

const RECORDING = new URL('./trusts-keystone.recorded.json', import.meta.url);

// TRUSTS_SCENARIO_RECORD=1 asks the peer again and rewrites the recording (then nothing is tested).
const recording = Boolean(process.env.TRUSTS_SCENARIO_RECORD);
if (recording) fs.writeFileSync(RECORDING, `${JSON.stringify(await scenario(PEER_URL, PEER_PASSWORD), null, 1)}\n`);

/** What Keystone 22 answered (recorded 2026-11-27 with TRUSTS_SCENARIO_RECORD=1), and what this service must answer too. */
const KEYSTONE = JSON.parse(fs.readFileSync(RECORDING, 'utf8')) as Record<string, Seen>;

t.test('this service: OS-TRUST as Keystone 22', { skip: recording && 'recording' }, async (t) => {
  const testApp = await startTestApp(t);
  await testApp.app.server.listen({ port: 0, host: '127.0.0.1' });
  const address = testApp.app.server.server.address();
  const base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  const seen = await scenario(base, ADMIN_PASSWORD, PUBLIC_URL);
  for (const step of Object.keys(KEYSTONE)) t.same(seen[step], KEYSTONE[step], step);
  t.same(Object.keys(seen), Object.keys(KEYSTONE), 'the same steps');
});

const skip = recording ? 'recording' : (await peerUp()) ? false : `no Keystone peer at ${PEER_URL} (start ../shared/peers/keystone/start.sh)`;

t.test('Keystone 22: OS-TRUST', { skip }, async (t) => {
  const seen = await scenario(PEER_URL, PEER_PASSWORD);
  for (const step of Object.keys(KEYSTONE)) t.same(seen[step], KEYSTONE[step], step);
});
