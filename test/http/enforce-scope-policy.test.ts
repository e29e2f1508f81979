// The service with policies/identity-enforce-scope (Keystone 22 with enforce_scope and
// enforce_new_defaults) against the shipped default: the same tokens, the decisions that differ.
import path from 'node:path';
import t, { type Test } from 'tap';
import { ADMIN_PASSWORD, startTestApp, type TestApp } from '../helpers/app.ts';
import { shippedPolicyDirectory } from '../policy/policy-directory.ts';

const ENFORCE_SCOPE = path.join(shippedPolicyDirectory, 'identity-enforce-scope');

interface World {
  app: TestApp;
  domainAdmin: string;
  systemAdmin: string;
  projectAdmin: string;
  projectReader: string;
  otherProjectId: string;
  ownProjectId: string;
  readerId: string;
}

/** A domain with an admin, a project with an admin and a reader, another project; their tokens. */
async function world(t: Test, overrides: Record<string, string>): Promise<World> {
  const app = await startTestApp(t, overrides);
  const { call, login } = app;
  const roles = Object.fromEntries(((await call('GET', '/v3/roles')).json().roles as { id: string; name: string }[]).map((role) => [role.name, role.id]));
  const domain = (await call('POST', '/v3/domains', { domain: { name: 'scoped' } })).json().domain;
  const project = (await call('POST', '/v3/projects', { project: { name: 'own', domain_id: domain.id } })).json().project;
  const other = (await call('POST', '/v3/projects', { project: { name: 'other', domain_id: domain.id } })).json().project;
  const user = async (name: string) => (await call('POST', '/v3/users', { user: { name, domain_id: domain.id, password: 'secret-pw' } })).json().user;
  const [domainAdmin, projectAdmin, projectReader] = await Promise.all([user('domain-admin'), user('project-admin'), user('project-reader')]);
  t.equal((await call('PUT', `/v3/domains/${domain.id}/users/${domainAdmin.id}/roles/${roles.admin}`)).statusCode, 204);
  t.equal((await call('PUT', `/v3/projects/${project.id}/users/${projectAdmin.id}/roles/${roles.admin}`)).statusCode, 204);
  t.equal((await call('PUT', `/v3/projects/${project.id}/users/${projectReader.id}/roles/${roles.reader}`)).statusCode, 204);
  const as = async (who: { name: string }, scope: unknown) => {
    const answer = await login({ name: who.name, domain: { id: domain.id } }, 'secret-pw', scope);
    t.equal(answer.status, 201, `${who.name} logs in`);
    return answer.token;
  };
  const system = await login({ name: 'admin', domain: { name: 'Default' } }, ADMIN_PASSWORD, { system: { all: true } });
  t.equal(system.status, 201, 'the bootstrap admin holds admin on the system');
  return {
    app,
    domainAdmin: await as(domainAdmin, { domain: { id: domain.id } }),
    systemAdmin: system.token,
    projectAdmin: await as(projectAdmin, { project: { id: project.id } }),
    projectReader: await as(projectReader, { project: { id: project.id } }),
    otherProjectId: other.id,
    ownProjectId: project.id,
    readerId: projectReader.id,
  };
}

t.test('Keystone with scope enforced: a domain admin is no cloud administrator, a project admin still is', async (t) => {
  const scoped = await world(t, { IDENTITY_POLICY_DIR: ENFORCE_SCOPE });
  const { call } = scoped.app;

  const region = await call('POST', '/v3/regions', { region: { id: 'by-domain-admin' } }, scoped.domainAdmin);
  t.equal(region.statusCode, 403, 'create_region takes system and project tokens only');
  t.same(region.json().error, { code: 403, title: 'Forbidden', message: 'You are not authorized to perform the requested action: identity:create_region.' });
  t.equal((await call('GET', '/v3/regions/by-domain-admin')).statusCode, 404, 'nothing was created');
  t.equal((await call('GET', '/v3/services', undefined, scoped.domainAdmin)).statusCode, 403, 'list_services: the same');
  t.equal((await call('POST', '/v3/regions', { region: { id: 'by-system-admin' } }, scoped.systemAdmin)).statusCode, 201, 'a system admin');
  t.equal((await call('POST', '/v3/regions', { region: { id: 'by-project-admin' } }, scoped.projectAdmin)).statusCode, 201, 'a project admin: admin_required, as in Keystone 22');
  // create_user accepts domain tokens: a domain admin is what admin_required makes it.
  t.equal((await call('POST', '/v3/users', { user: { name: 'made-by-domain-admin' } }, scoped.domainAdmin)).statusCode, 201, 'create_user takes domain tokens too');

  // get_project's new default has no admin_required: its readers, and the project's own tokens.
  const other = await call('GET', `/v3/projects/${scoped.otherProjectId}`, undefined, scoped.projectAdmin);
  t.equal(other.statusCode, 403, 'a project admin does not read another project');
  t.equal((await call('GET', `/v3/projects/${scoped.ownProjectId}`, undefined, scoped.projectAdmin)).statusCode, 200, 'its own project');
  t.equal((await call('GET', `/v3/projects/${scoped.otherProjectId}`, undefined, scoped.domainAdmin)).statusCode, 200, 'a domain reader of its domain');

  // EC2 credentials: the owner needs the member role.
  const ec2 = await call('POST', `/v3/users/${scoped.readerId}/credentials/OS-EC2`, { tenant_id: scoped.ownProjectId }, scoped.projectReader);
  t.equal(ec2.statusCode, 403, 'a reader does not create its own EC2 credential');
  t.equal((await call('GET', `/v3/users/${scoped.readerId}/credentials/OS-EC2`, undefined, scoped.projectReader)).statusCode, 403, 'nor lists them');
});

t.test('the shipped default (enforce_scope off): the same tokens, any admin is a cloud administrator', async (t) => {
  const open = await world(t, {});
  const { call } = open.app;
  t.equal((await call('POST', '/v3/regions', { region: { id: 'by-domain-admin' } }, open.domainAdmin)).statusCode, 201);
  t.equal((await call('GET', `/v3/projects/${open.otherProjectId}`, undefined, open.projectAdmin)).statusCode, 200);
  t.equal((await call('POST', `/v3/users/${open.readerId}/credentials/OS-EC2`, { tenant_id: open.ownProjectId }, open.projectReader)).statusCode, 201);
});
