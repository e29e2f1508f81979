import type { AssertionVerifier } from '../../src/federation/assertion.ts';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import { startTestApp, type TestApp } from './app.ts';
import { ROOT } from './processes.ts';
import { startEchoUpstream, type EchoUpstream } from './upstream.ts';

export const ECHO_RULES = `# test rules for the echo service
p, reader, project, /v1/{project_id}/things, GET, allow
p, reader, project, /v1/{project_id}/things/*, GET, allow
p, member, project, /v1/{project_id}/things, POST, allow
p, member, project, /v1/public/**, *, allow
p, admin, *, /**, *, allow
`;

/** A policy directory with the product's model and rules for the test's echo service. */
function policyDirectory(): string {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-policy-'));
  fs.copyFileSync(path.join(ROOT, 'policies', 'model.conf'), path.join(directory, 'model.conf'));
  fs.writeFileSync(path.join(directory, 'echo.csv'), ECHO_RULES);
  return directory;
}

export interface World {
  testApp: TestApp;
  upstream: EchoUpstream;
  port: number;
  projectId: string;
  otherProjectId: string;
  member: string;
  reader: string;
  admin: string;
  policies: string;
}

/**
 * A bootstrapped service listening on a real port, a real echo upstream registered as service type
 * `echo` (internal endpoint in RegionOne), a policy directory for it, two projects and member/reader
 * tokens scoped to the first.
 */
export async function gatewayWorld(
  t: { teardown(fn: () => unknown): void },
  overrides: Record<string, string> = {},
  options: {
    logger?: Logger;
    assertionVerifiers?: readonly AssertionVerifier[];
    /** The echo upstream to register, started (and closed) by the caller; a new one by default. */
    upstream?: EchoUpstream;
  } = {},
): Promise<World> {
  const { logger, assertionVerifiers } = options;
  const policies = policyDirectory();
  t.teardown(() => fs.rmSync(policies, { recursive: true, force: true }));
  const testApp = await startTestApp(t, { POLICY_DIR: policies, UPSTREAM_RESPONSE_TIMEOUT_MS: '1000', ...overrides }, { ...(logger ? { logger } : {}), ...(assertionVerifiers ? { assertionVerifiers } : {}) });
  let upstream = options.upstream;
  if (!upstream) {
    const started = await startEchoUpstream();
    t.teardown(() => started.close());
    upstream = started;
  }
  const { call, login, app } = testApp;
  const service = (await call('POST', '/v3/services', { service: { type: 'echo', name: 'echo' } })).json().service;
  await call('POST', '/v3/endpoints', { endpoint: { service_id: service.id, interface: 'internal', region_id: 'RegionOne', url: `${upstream.url}/v1` } });
  await call('POST', '/v3/endpoints', { endpoint: { service_id: service.id, interface: 'public', region_id: 'RegionOne', url: 'http://gateway.test/echo/v1' } });
  const roles = Object.fromEntries((await call('GET', '/v3/roles')).json().roles.map((r: { name: string; id: string }) => [r.name, r.id]));
  const project = (await call('POST', '/v3/projects', { project: { name: 'gw' } })).json().project;
  const other = (await call('POST', '/v3/projects', { project: { name: 'gw-other' } })).json().project;
  const tokens: Record<string, string> = {};
  for (const role of ['member', 'reader']) {
    const user = (await call('POST', '/v3/users', { user: { name: `gw-${role}`, password: 'Pw-1' } })).json().user;
    await call('PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${roles[role]}`);
    await call('PUT', `/v3/projects/${other.id}/users/${user.id}/roles/${roles[role]}`);
    tokens[role] = (await login({ id: user.id }, 'Pw-1', { project: { id: project.id } })).token;
  }
  await app.server.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.server.address();
  return {
    testApp,
    upstream,
    port: typeof address === 'object' && address ? address.port : 0,
    projectId: project.id,
    otherProjectId: other.id,
    member: tokens.member!,
    reader: tokens.reader!,
    admin: testApp.adminToken,
    policies,
  };
}

// '[-_]': a name spelled with '_' reaching the upstream counts as the identity header it imitates.
export const IDENTITY_HEADER = /^(x[-_]identity[-_]status|x[-_](service[-_])?(user|project|domain|roles|is[-_]admin[-_]project|service[-_]catalog)|x[-_]service[-_]identity[-_]status|openstack[-_]system[-_]scope|x[-_]role|x[-_]tenant|x[-_]user)/i;
