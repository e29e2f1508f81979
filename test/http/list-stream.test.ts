import http from 'node:http';
import net from 'node:net';
import t, { type Test } from 'tap';
import type { LightMyRequestResponse } from 'fastify';
import { LIST_PIECE_CHARS } from '../../src/http/list-stream.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';

// GET /v3/users, /v3/projects and /v3/role_assignments read LIST_PAGE_SIZE rows at a time and
// stream a list longer than one page. Whatever the page size, the body must be byte for byte the
// one-page answer (fastify serializing the whole list with the route schema, as before streaming).

const ONE_PAGE = 100_000;
const PAGE_SIZES = [1, 2, 3, 7];

/** The response with the whole list in one page (the reference), then with each small page size. */
/**
 * `rows`: how many rows are read in pages when that is not the entry count (effective listings
 * expand grants), null when not counted here (then whether the answer was streamed is not checked).
 */
async function compare(t: Test, testApp: TestApp, url: string, token?: string, options: { rows?: number | null } = {}): Promise<LightMyRequestResponse> {
  const { config, call } = testApp;
  config.listPageSize = ONE_PAGE;
  const reference = await call('GET', url, undefined, token);
  t.equal(reference.statusCode, 200, `${url}: 200`, { body: reference.body });
  t.ok(reference.headers['content-length'], `${url}: one page is sent whole (content-length)`);
  const rows = options.rows !== undefined ? options.rows : (Object.values(reference.json() as Record<string, unknown>).find(Array.isArray) as unknown[]).length;
  for (const size of PAGE_SIZES) {
    config.listPageSize = size;
    const paged = await call('GET', url, undefined, token);
    t.equal(paged.statusCode, 200, `${url} in pages of ${size}: 200`);
    t.equal(paged.body, reference.body, `${url} in pages of ${size}: the same bytes`);
    t.equal(paged.headers['content-type'], reference.headers['content-type'], `${url} in pages of ${size}: the same content type`);
    if (rows === null) continue;
    if (rows >= size) t.notOk(paged.headers['content-length'], `${url} in pages of ${size}: streamed`);
    else t.ok(paged.headers['content-length'], `${url} in pages of ${size}: one page`);
  }
  config.listPageSize = ONE_PAGE;
  return reference;
}

t.test('long lists are streamed in pages with the same bytes as one page', async (t) => {
  const testApp = await startTestApp(t, { IDENTITY_PASSWORD_EXPIRES_DAYS: '30' });
  const { call } = testApp;
  const created = async (path: string, body: unknown) => {
    const response = await call('POST', path, body);
    if (response.statusCode !== 201) throw new Error(`POST ${path}: ${response.statusCode} ${response.body}`);
    return Object.values(response.json() as Record<string, { id: string }>)[0]!;
  };
  const domains = [await created('/v3/domains', { domain: { name: 'ls-a' } }), await created('/v3/domains', { domain: { name: 'ls-b' } })];
  const projects: { id: string }[] = [];
  for (const [index, name] of ['zeta', 'Alpha', 'alpha', 'beta', 'ünïcode', 'p 1', 'p_2', 'p%3'].entries()) {
    for (const domain of domains) {
      projects.push(
        await created('/v3/projects', {
          project: { name, domain_id: domain.id, description: `d${index}`, tags: index % 2 ? ['t1', `tag${index}`] : [], ...(index === 3 ? { colour: 'blue' } : {}) },
        }),
      );
    }
  }
  await created('/v3/projects', { project: { name: 'child', domain_id: domains[0]!.id, parent_id: projects[0]!.id, enabled: false } });
  // Names repeat across domains (the id breaks the tie); some users have no password (null expiry),
  // a default project, extra attributes.
  const users: { id: string }[] = [];
  for (const [index, name] of ['bob', 'Bob', 'alice', 'carol', 'dave', 'émile', 'x"y', 'z\\w'].entries()) {
    for (const domain of domains) {
      users.push(
        await created('/v3/users', {
          user: {
            name,
            domain_id: domain.id,
            ...(index % 3 ? { password: `Secret-${index}` } : {}),
            ...(index % 2 ? { default_project_id: projects[index]!.id, email: `${index}@example.org` } : {}),
            ...(index === 4 ? { enabled: false } : {}),
          },
        }),
      );
    }
  }
  const groups = [await created('/v3/groups', { group: { name: 'g1', domain_id: domains[0]!.id } }), await created('/v3/groups', { group: { name: 'g2', domain_id: domains[1]!.id } })];
  for (const user of users.slice(0, 3)) t.equal((await call('PUT', `/v3/groups/${groups[0]!.id}/users/${user.id}`)).statusCode, 204);
  const roles = (await call('GET', '/v3/roles')).json().roles as { id: string; name: string }[];
  const domainRole = await created('/v3/roles', { role: { name: 'dr', domain_id: domains[0]!.id } });
  const grants = [
    ...users.slice(0, 6).map((user, index) => `/v3/projects/${projects[index % 3]!.id}/users/${user.id}/roles/${roles[index % roles.length]!.id}`),
    // The same target for users and groups: users sort first (actor_type desc) across page ends.
    `/v3/projects/${projects[0]!.id}/groups/${groups[0]!.id}/roles/${roles[0]!.id}`,
    `/v3/projects/${projects[0]!.id}/groups/${groups[1]!.id}/roles/${roles[1]!.id}`,
    `/v3/domains/${domains[0]!.id}/users/${users[7]!.id}/roles/${roles[0]!.id}`,
    `/v3/domains/${domains[0]!.id}/groups/${groups[0]!.id}/roles/${domainRole.id}`,
    // The same grant direct and inherited: only `inherited` tells them apart.
    `/v3/OS-INHERIT/domains/${domains[1]!.id}/users/${users[8]!.id}/roles/${roles[1]!.id}/inherited_to_projects`,
    `/v3/domains/${domains[1]!.id}/users/${users[8]!.id}/roles/${roles[1]!.id}`,
    `/v3/OS-INHERIT/projects/${projects[1]!.id}/groups/${groups[1]!.id}/roles/${roles[2]!.id}/inherited_to_projects`,
    `/v3/system/users/${users[9]!.id}/roles/${roles[0]!.id}`,
    // One source (actor, target) holding roles that imply each other (bootstrap: admin → member →
    // reader): its effective entries repeat across its grants, and with small pages across page ends.
    ...roles.map((role) => `/v3/projects/${projects[2]!.id}/users/${users[10]!.id}/roles/${role.id}`),
    ...roles.map((role) => `/v3/projects/${projects[2]!.id}/groups/${groups[0]!.id}/roles/${role.id}`),
    ...roles.map((role) => `/v3/OS-INHERIT/domains/${domains[0]!.id}/users/${users[11]!.id}/roles/${role.id}/inherited_to_projects`),
  ];
  for (const grant of grants) t.equal((await call('PUT', grant)).statusCode, 204, `PUT ${grant}`);

  await t.test('users', async (t) => {
    const all = await compare(t, testApp, '/v3/users');
    t.ok(all.json().users.length >= users.length, 'every user');
    t.ok(all.json().users.some((user: { password_expires_at: string | null }) => user.password_expires_at !== null), 'some with a password expiry');
    await compare(t, testApp, `/v3/users?domain_id=${domains[0]!.id}`);
    await compare(t, testApp, '/v3/users?name__icontains=B');
    await compare(t, testApp, '/v3/users?enabled=true');
    const none = await compare(t, testApp, '/v3/users?name=nobody');
    t.same(none.json().users, []);
  });

  await t.test('group members', async (t) => {
    const members = await compare(t, testApp, `/v3/groups/${groups[0]!.id}/users`);
    t.same(members.json().users.map((user: { id: string }) => user.id).sort(), users.slice(0, 3).map((user) => user.id).sort(), 'exactly the members');
    await compare(t, testApp, `/v3/groups/${groups[0]!.id}/users?name__icontains=b`);
    await compare(t, testApp, `/v3/groups/${groups[0]!.id}/users?domain_id=${domains[0]!.id}`);
    t.same((await compare(t, testApp, `/v3/groups/${groups[1]!.id}/users`)).json().users, [], 'a group without members');
    testApp.config.listPageSize = 1;
    const missing = await call('GET', '/v3/groups/nope/users');
    t.equal(missing.statusCode, 404, 'an unknown group: 404 before anything is sent');
    testApp.config.listPageSize = ONE_PAGE;
  });

  await t.test('users: exactly a multiple of the page size (the last read comes back empty)', async (t) => {
    const { config } = testApp;
    config.listPageSize = ONE_PAGE;
    const reference = await call('GET', `/v3/users?domain_id=${domains[1]!.id}`);
    const count = reference.json().users.length;
    t.equal(count, 8);
    for (const size of [4, 8]) {
      config.listPageSize = size;
      const paged = await call('GET', `/v3/users?domain_id=${domains[1]!.id}`);
      t.equal(paged.body, reference.body, `pages of ${size}`);
    }
    config.listPageSize = ONE_PAGE;
  });

  await t.test('projects', async (t) => {
    const all = await compare(t, testApp, '/v3/projects');
    t.ok(all.json().projects.length > projects.length, 'every project');
    t.ok(all.json().projects.some((project: { colour?: string }) => project.colour === 'blue'), 'extra attributes');
    await compare(t, testApp, `/v3/projects?domain_id=${domains[1]!.id}`);
    await compare(t, testApp, '/v3/projects?tags-any=t1');
    await compare(t, testApp, '/v3/projects?is_domain=true');
    await compare(t, testApp, '/v3/projects?enabled=false');
  });

  await t.test('role assignments', async (t) => {
    const all = await compare(t, testApp, '/v3/role_assignments');
    t.ok(all.json().role_assignments.length >= grants.length, 'every assignment');
    await compare(t, testApp, '/v3/role_assignments?include_names');
    await compare(t, testApp, '/v3/role_assignments?include_names=true');
    await compare(t, testApp, `/v3/role_assignments?scope.project.id=${projects[0]!.id}`);
    await compare(t, testApp, `/v3/role_assignments?scope.domain.id=${domains[0]!.id}&include_names`);
    await compare(t, testApp, `/v3/role_assignments?role.id=${roles[0]!.id}`);
    await compare(t, testApp, '/v3/role_assignments?scope.OS-INHERIT:inherited_to=projects');
    // Effective listings expand one page of grants at a time.
    const effective = await compare(t, testApp, '/v3/role_assignments?effective', undefined, { rows: null });
    const entries = effective.json().role_assignments as { user?: { id: string }; scope: { project?: { id: string } }; role: { id: string }; links: Record<string, string> }[];
    // One implied role reached from two grants of a source (admin ⇒ member ⇒ reader, member ⇒
    // reader) is listed once; only the grant link would tell the two apart.
    const keys = entries.map(({ links: { assignment, ...links }, ...entry }) => JSON.stringify({ ...entry, source: assignment?.replace(/roles\/[^/]+$/, ''), links }));
    t.equal(new Set(keys).size, keys.length, 'no entry twice');
    const reader = roles.find((role) => role.name === 'reader')!;
    t.ok(entries.some((entry) => entry.user?.id === users[10]!.id && entry.role.id === reader.id), 'implied roles listed');
    t.ok(entries.some((entry) => entry.user?.id === users[0]!.id && entry.scope.project?.id === projects[2]!.id), 'group grants expanded to members');
    t.ok(entries.some((entry) => entry.user?.id === users[11]!.id && entry.scope.project?.id === projects[0]!.id), 'inherited grants placed on projects');
    await compare(t, testApp, '/v3/role_assignments?effective&include_names', undefined, { rows: null });
    await compare(t, testApp, `/v3/role_assignments?effective&user.id=${users[0]!.id}`, undefined, { rows: null });
    await compare(t, testApp, `/v3/role_assignments?effective&scope.project.id=${projects[2]!.id}`, undefined, { rows: null });
    await compare(t, testApp, `/v3/role_assignments?effective&scope.project.id=${projects[0]!.id}&include_subtree`, undefined, { rows: null });
    await compare(t, testApp, `/v3/role_assignments?effective&role.id=${reader.id}`, undefined, { rows: null });
    // Two direct grants on the domain and three inherited ones (placed on its projects).
    await compare(t, testApp, `/v3/role_assignments?effective&scope.domain.id=${domains[0]!.id}`, undefined, { rows: 5 });
    // Refusals come before anything is sent.
    testApp.config.listPageSize = 1;
    const refused = await call('GET', `/v3/role_assignments?user.id=${users[0]!.id}&group.id=${groups[0]!.id}`);
    t.equal(refused.statusCode, 400);
    t.equal(refused.json().error.message, 'Specify a user or group, not both');
    const unknown = await call('GET', '/v3/role_assignments?effective&scope.project.id=nope');
    t.equal(unknown.statusCode, 404, 'an effective listing of an unknown project: 404 before anything is sent');
    t.same(unknown.json().error, { code: 404, title: 'Not Found', message: 'Could not find project: nope.' });
    testApp.config.listPageSize = ONE_PAGE;
  });

  await t.test('a domain-scoped caller sees its own domain, streamed as well', async (t) => {
    const admin = users[4]!; // alice in ls-a
    t.equal((await call('PATCH', `/v3/users/${admin.id}`, { user: { password: 'Secret-admin-1' } })).statusCode, 200);
    const adminRole = roles.find((role) => role.name === 'admin')!;
    t.equal((await call('PUT', `/v3/domains/${domains[0]!.id}/users/${admin.id}/roles/${adminRole.id}`)).statusCode, 204);
    testApp.clock.advance(2000); // past the revocations of the password change (second precision)
    const session = await testApp.login({ id: admin.id }, 'Secret-admin-1', { domain: { id: domains[0]!.id } });
    t.equal(session.status, 201);
    const listed = await compare(t, testApp, '/v3/users', session.token);
    t.ok(listed.json().users.every((user: { domain_id: string }) => user.domain_id === domains[0]!.id), 'only its domain');
    await compare(t, testApp, '/v3/projects', session.token);
  });

  await t.test('HEAD of a streamed list', async (t) => {
    testApp.config.listPageSize = 2;
    const head = await testApp.request({ method: 'HEAD', url: '/v3/users', headers: { 'x-auth-token': testApp.adminToken } });
    t.equal(head.statusCode, 200);
    t.equal(head.body, '');
    testApp.config.listPageSize = ONE_PAGE;
  });
});

t.test("a streamed page's JSON is written in pieces that stay below V8's large-object size", async (t) => {
  const testApp = await startTestApp(t);
  const { call, config } = testApp;
  const domain = (await call('POST', '/v3/domains', { domain: { name: 'pieces' } })).json().domain as { id: string };
  // 40 users of ~5 KB each: a page of 20 is ~100 KB of JSON, three pieces' worth.
  for (let index = 0; index < 40; index++) {
    const created = await call('POST', '/v3/users', { user: { name: `u${index}`, domain_id: domain.id, notes: `${index}`.padEnd(5000, 'n') } });
    t.equal(created.statusCode, 201);
  }
  const url = `/v3/users?domain_id=${domain.id}`;
  config.listPageSize = 100_000;
  const reference = (await call('GET', url)).body;
  config.listPageSize = 20;
  await testApp.app.server.listen({ port: 0, host: '127.0.0.1' });
  const port = (testApp.app.server.server.address() as net.AddressInfo).port;
  // What the list hands to the response, write by write (node may frame several writes as one
  // HTTP chunk: the strings are what V8 holds).
  const written: number[] = [];
  const write = http.ServerResponse.prototype.write;
  http.ServerResponse.prototype.write = function (this: http.ServerResponse, chunk: unknown, ...rest: unknown[]) {
    written.push(typeof chunk === 'string' ? chunk.length : (chunk as Uint8Array).byteLength);
    return (write as (...args: unknown[]) => boolean).call(this, chunk, ...rest);
  } as typeof write;
  t.teardown(() => {
    http.ServerResponse.prototype.write = write;
  });
  const body = await new Promise<string>((resolve, reject) => {
    http.get(`http://127.0.0.1:${port}${url}`, { headers: { 'x-auth-token': testApp.adminToken } }, (response) => {
      t.equal(response.statusCode, 200);
      t.equal(response.headers['transfer-encoding'], 'chunked', 'streamed');
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (part: string) => (text += part));
      response.on('end', () => resolve(text));
    }).on('error', reject);
  });
  http.ServerResponse.prototype.write = write;
  t.equal(body, reference, 'the same bytes as one page');
  t.ok(written.length >= 6, `written in pieces (${written.join(', ')} characters)`);
  // A piece ends once it reaches LIST_PIECE_CHARS, so it may hold one entity more (here ~5 KB).
  const largest = Math.max(...written);
  t.ok(largest < LIST_PIECE_CHARS + 6000, `no piece much over ${LIST_PIECE_CHARS} characters (largest ${largest})`);
});
