/**
 * What the scenarios need, created through the public Keystone v3 API only (so the same code works
 * against an external server, Keystone included): a domain with a project, a member user and extra
 * users to list, an application credential, tokens, and the `bench` service's internal endpoint.
 */
import { randomBytes } from 'node:crypto';
import { onCleanup } from './processes.ts';

export interface AdminCredentials {
  username: string;
  password: string;
  projectName: string;
  userDomainName: string;
  projectDomainName: string;
}

export interface Fixtures {
  adminToken: string;
  domainId: string;
  projectId: string;
  userId: string;
  /** Project-scoped member token of the bench user. */
  userToken: string;
  /** Body of POST /v3/auth/tokens: the bench user's password, project scope. */
  passwordAuth: string;
  /** Body of POST /v3/auth/tokens: the application credential (no scope: it carries its project). */
  applicationCredentialAuth: string;
}

/** Users in the bench domain, as bench.sh's BENCH_USERS: list-users returns this many. */
const LISTED_USERS = 20;

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** One identity API call; anything but 2xx throws with the response body (setup must not half-work). */
async function api(base: string, method: string, path: string, token?: string, body?: unknown): Promise<{ status: number; headers: Headers; json: any }> {
  const response = await fetch(`${base}/v3${path}`, {
    method,
    headers: { ...(token ? { 'x-auth-token': token } : {}), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (response.status < 200 || response.status > 299) {
    throw new ApiError(response.status, `bench setup: ${method} /v3${path} -> HTTP ${response.status}: ${text.slice(0, 300)}`);
  }
  return { status: response.status, headers: response.headers, json: text ? JSON.parse(text) : undefined };
}

function passwordAuthBody(user: { name: string; domain: string; password: string }, project: { name: string; domain: string }) {
  return {
    auth: {
      identity: { methods: ['password'], password: { user: { name: user.name, domain: { name: user.domain }, password: user.password } } },
      scope: { project: { name: project.name, domain: { name: project.domain } } },
    },
  };
}

async function issueToken(base: string, body: unknown): Promise<string> {
  const { headers } = await api(base, 'POST', '/auth/tokens', undefined, body);
  const token = headers.get('x-subject-token');
  if (!token) throw new Error('bench setup: POST /v3/auth/tokens answered without X-Subject-Token');
  return token;
}

/**
 * Creates the fixtures. `removeAfter`: delete them at cleanup (an external server keeps its data;
 * a service started by the bench is thrown away with its database instead).
 */
export async function createFixtures(base: string, admin: AdminCredentials, removeAfter: boolean): Promise<Fixtures> {
  const adminToken = await issueToken(
    base,
    passwordAuthBody({ name: admin.username, domain: admin.userDomainName, password: admin.password }, { name: admin.projectName, domain: admin.projectDomainName }),
  );
  const suffix = randomBytes(4).toString('hex');
  const name = `bench-${suffix}`;
  const password = `bench-${randomBytes(12).toString('hex')}`;

  const { json: roles } = await api(base, 'GET', '/roles?name=member', adminToken);
  const memberRoleId: string | undefined = roles.roles[0]?.id;
  if (!memberRoleId) throw new Error('bench setup: no "member" role (run bootstrap)');

  const domainId: string = (await api(base, 'POST', '/domains', adminToken, { domain: { name } })).json.domain.id;
  if (removeAfter) {
    onCleanup(`delete domain ${name}`, async () => {
      await api(base, 'PATCH', `/domains/${domainId}`, adminToken, { domain: { enabled: false } });
      await api(base, 'DELETE', `/domains/${domainId}`, adminToken);
    });
  }
  const projectId: string = (await api(base, 'POST', '/projects', adminToken, { project: { name, domain_id: domainId } })).json.project.id;
  const userId: string = (await api(base, 'POST', '/users', adminToken, { user: { name, domain_id: domainId, password } })).json.user.id;
  await api(base, 'PUT', `/projects/${projectId}/users/${userId}/roles/${memberRoleId}`, adminToken);
  // Extra users (no password: creating them must not cost a bcrypt hash each).
  for (let index = 2; index <= LISTED_USERS; index += 1) {
    await api(base, 'POST', '/users', adminToken, { user: { name: `${name}-${index}`, domain_id: domainId } });
  }

  const passwordAuth = passwordAuthBody({ name, domain: name, password }, { name, domain: name });
  const userToken = await issueToken(base, passwordAuth);
  // Created with the user's project-scoped token: the credential takes that project and its roles.
  const { json: created } = await api(base, 'POST', `/users/${userId}/application_credentials`, userToken, { application_credential: { name } });
  const applicationCredentialAuth = {
    auth: { identity: { methods: ['application_credential'], application_credential: { id: created.application_credential.id, secret: created.application_credential.secret } } },
  };

  return {
    adminToken,
    domainId,
    projectId,
    userId,
    userToken,
    passwordAuth: JSON.stringify(passwordAuth),
    applicationCredentialAuth: JSON.stringify(applicationCredentialAuth),
  };
}

/** Registers service type `type` (default `bench`) with an internal endpoint in RegionOne at `upstreamUrl` + `suffix`. */
export async function registerBenchService(base: string, adminToken: string, upstreamUrl: string, removeAfter: boolean, type = 'bench', suffix = '/v1'): Promise<void> {
  const serviceId: string = (await api(base, 'POST', '/services', adminToken, { service: { type, name: type, enabled: true } })).json.service.id;
  if (removeAfter) onCleanup(`delete service ${type}`, () => api(base, 'DELETE', `/services/${serviceId}`, adminToken).then(() => undefined));
  await api(base, 'POST', '/endpoints', adminToken, {
    endpoint: { service_id: serviceId, interface: 'internal', region_id: 'RegionOne', url: `${upstreamUrl}${suffix}`, enabled: true },
  });
}
