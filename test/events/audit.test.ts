import t from 'tap';
import { pino } from 'pino';
import { describeWrite } from '../../src/http/audit.ts';
import type { AuditNotification } from '../../src/events/audit.ts';
import { ADMIN_PASSWORD, startTestApp } from '../helpers/app.ts';
import { gatewayWorld } from '../helpers/gateway.ts';
import { testRedis } from '../helpers/redis.ts';
import { rawRequest } from '../helpers/upstream.ts';

// Audit events as Keystone sends them with notification_format=cadf: to the log ("msg":"audit"),
// and to a Redis stream when REDIS_URL is set.

function auditLog() {
  const lines: string[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
  const notifications = (): AuditNotification[] =>
    lines
      .map((line) => JSON.parse(line))
      .filter((entry) => entry.msg === 'audit')
      .map((entry) => entry.notification);
  return { logger, lines, notifications };
}

const CADF_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+0000$/;

t.test('authentication success and failure: identity.authenticate', async (t) => {
  const log = auditLog();
  const app = await startTestApp(t, { IDENTITY_LOCKOUT_FAILURE_ATTEMPTS: '2', AUTH_RATE_LIMIT_PER_USER: '4' }, { logger: log.logger });
  const user = (await app.call('POST', '/v3/users', { user: { name: 'alice', password: 'Pw-1' } })).json().user;
  log.lines.length = 0;

  const success = await app.request({
    method: 'POST',
    url: '/v3/auth/tokens',
    headers: { 'content-type': 'application/json', 'user-agent': 'openstacksdk/4.0' },
    payload: JSON.stringify({ auth: { identity: { methods: ['password'], password: { user: { name: 'alice', domain: { id: 'default' }, password: 'Pw-1' } } } } }),
  });
  t.equal(success.statusCode, 201);
  const [succeeded] = log.notifications();
  t.match(succeeded, {
    message_id: /^[0-9a-f-]{36}$/,
    publisher_id: /^identity\./,
    event_type: 'identity.authenticate',
    priority: 'INFO',
    timestamp: /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}$/,
    payload: {
      typeURI: 'http://schemas.dmtf.org/cloud/audit/1.0/event',
      id: /^[0-9a-f-]{36}$/,
      eventTime: CADF_TIME,
      eventType: 'activity',
      action: 'authenticate',
      outcome: 'success',
      initiator: {
        typeURI: 'service/security/account/user',
        id: user.id,
        user_id: user.id,
        name: 'alice',
        username: 'alice',
        host: { address: '127.0.0.1', agent: 'openstacksdk/4.0' },
        request_id: success.headers['x-openstack-request-id'],
      },
      target: { typeURI: 'service/security/account/user', id: user.id },
      observer: { typeURI: 'service/security' },
    },
  });
  t.notOk('reason' in succeeded!.payload);

  log.lines.length = 0;
  await app.login({ id: user.id }, 'wrong');
  await app.login({ name: 'ghost', domain: { id: 'default' } }, 'whatever');
  await app.login({ id: user.id }, 'wrong');
  await app.login({ id: user.id }, 'Pw-1');
  await app.login({ id: user.id }, 'Pw-1');
  t.equal((await app.login({ id: user.id }, 'Pw-1')).status, 429);
  t.equal((await app.call('POST', '/v3/auth/tokens', { auth: { identity: { methods: ['password'] } } }, null)).statusCode, 400);
  const failures = log.notifications();
  t.equal(failures.length, 6, 'one per attempt; a malformed request (400) is no attempt');
  t.ok(failures.every((event) => event.event_type === 'identity.authenticate' && event.payload.outcome === 'failure'));
  t.same(failures.map((event) => event.payload.reason), [
    { reasonType: 'Invalid user / password', reasonCode: '401' },
    { reasonType: 'Could not find user: ghost.', reasonCode: '404' },
    { reasonType: 'Invalid user / password', reasonCode: '401' },
    { reasonType: `The account is locked for user: ${user.id}.`, reasonCode: '401' },
    { reasonType: `The account is locked for user: ${user.id}.`, reasonCode: '401' },
    {
      reasonType: 'Too many authentication attempts. Retry after the number of seconds given in Retry-After.',
      reasonCode: '429',
    },
  ]);
  t.match(failures[0]!.payload.initiator, { user_id: user.id });
  t.match(failures[1]!.payload.initiator, { user_name: 'ghost' });
  t.notOk('user_id' in failures[1]!.payload.initiator, 'an unknown user has no id');
});

t.test('every create, update and delete; role grants and revocations; token revocation', async (t) => {
  const log = auditLog();
  const app = await startTestApp(t, {}, { logger: log.logger });
  const { call } = app;
  const admin = (await call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': app.adminToken })).json().token;
  log.lines.length = 0;
  const events = () => log.notifications().map((event) => ({ type: event.event_type, ...event.payload }));

  const user = (await call('POST', '/v3/users', { user: { name: 'bob', password: 'Pw-1' } })).json().user;
  await call('PATCH', `/v3/users/${user.id}`, { user: { email: 'bob@example.org' } });
  const project = (await call('POST', '/v3/projects', { project: { name: 'p1' } })).json().project;
  const group = (await call('POST', '/v3/groups', { group: { name: 'g1' } })).json().group;
  await call('PUT', `/v3/groups/${group.id}/users/${user.id}`);
  const member = (await call('GET', '/v3/roles?name=member')).json().roles[0];
  await call('PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${member.id}`);
  await call('PUT', `/v3/OS-INHERIT/domains/default/groups/${group.id}/roles/${member.id}/inherited_to_projects`);
  await call('PUT', `/v3/system/users/${user.id}/roles/${member.id}`);
  await call('DELETE', `/v3/projects/${project.id}/users/${user.id}/roles/${member.id}`);
  await call('DELETE', `/v3/groups/${group.id}/users/${user.id}`);
  t.equal((await call('DELETE', '/v3/users/no-such-user')).statusCode, 404);
  const session = await app.login({ id: user.id }, 'Pw-1');
  const sessionAuditId = session.body.token.audit_ids[0];
  t.equal((await call('DELETE', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': session.token })).statusCode, 204);
  await call('DELETE', `/v3/users/${user.id}`);

  const initiator = { typeURI: 'service/security/account/user', id: admin.user.id, user_id: admin.user.id, project_id: admin.project.id, host: { address: '127.0.0.1' } };
  const seen = events().filter((event) => event.type !== 'identity.authenticate');
  t.match(seen, [
    { type: 'identity.user.created', action: 'created.user', outcome: 'success', target: { typeURI: 'data/security/account/user', id: user.id }, resource_info: user.id, initiator },
    { type: 'identity.user.updated', action: 'updated.user', target: { id: user.id } },
    { type: 'identity.project.created', target: { typeURI: 'data/security/project', id: project.id } },
    { type: 'identity.group.created', target: { typeURI: 'data/security/group', id: group.id } },
    { type: 'identity.group.updated', target: { id: group.id }, actor_id: user.id, actor_type: 'user', actor_operation: 'added' },
    { type: 'identity.role_assignment.created', action: 'created.role_assignment', project: project.id, user: user.id, role: member.id, inherited_to_projects: false },
    { type: 'identity.role_assignment.created', domain: 'default', group: group.id, role: member.id, inherited_to_projects: true },
    { type: 'identity.role_assignment.created', system: 'all', user: user.id, role: member.id },
    { type: 'identity.role_assignment.deleted', action: 'deleted.role_assignment', project: project.id, user: user.id, role: member.id },
    { type: 'identity.group.updated', actor_operation: 'removed' },
    { type: 'identity.token.revoked', action: 'revoke.token', target: { typeURI: 'data/security/credential', id: sessionAuditId }, initiator },
    { type: 'identity.user.deleted', action: 'deleted.user', target: { id: user.id } },
  ]);
  t.equal(seen.length, 12, 'nothing for the failed delete');
  t.notOk(log.lines.some((line) => line.includes(session.token)), 'the revoked token itself is never written');
  for (const event of seen) t.match(event.eventTime, CADF_TIME);
});

t.test('the self-service password change: identity.authenticate and identity.user.updated', async (t) => {
  const log = auditLog();
  const app = await startTestApp(t, {}, { logger: log.logger });
  const user = (await app.call('POST', '/v3/users', { user: { name: 'carol', password: 'Pw-1' } })).json().user;
  log.lines.length = 0;
  const change = (original: string) => app.call('POST', `/v3/users/${user.id}/password`, { user: { original_password: original, password: 'Pw-2' } }, null);
  t.equal((await change('wrong')).statusCode, 401);
  t.equal((await change('Pw-1')).statusCode, 204);
  t.match(log.notifications(), [
    { event_type: 'identity.authenticate', payload: { outcome: 'failure', initiator: { user_id: user.id }, reason: { reasonType: 'Invalid user / password' } } },
    { event_type: 'identity.authenticate', payload: { outcome: 'success', initiator: { user_id: user.id } } },
    { event_type: 'identity.user.updated', payload: { target: { id: user.id }, initiator: { user_id: user.id } } },
  ]);
});

t.test('every write route of the identity API has its audit event', async (t) => {
  const app = await startTestApp(t);
  const writes = app.app.routes.filter((route) => ['POST', 'PUT', 'PATCH', 'DELETE'].includes(route.method));
  t.ok(writes.length > 30, `${writes.length} write routes`);
  for (const route of writes) {
    const params = new Proxy({}, { get: (_target, name) => `some-${String(name)}` }) as Record<string, string>;
    const audit = describeWrite(route.method, route.url, params, () => {
      const key = route.url.split('/').filter((part) => part && !part.startsWith(':')).pop()!;
      // OS-EC2 answers a credential named by its access key (its id is the key's hash).
      if (key === 'OS-EC2') return { credential: { access: 'new-access' } };
      return { [key.replace(/ies$/, 'y').replace(/s$/, '')]: { id: 'new-id' } };
    }, () => 'oauth_token=new-id&oauth_token_secret=not-a-secret');
    t.not(audit, undefined, `${route.method} ${route.url}`);
  }
});

t.test('gateway refusals are audited: gateway.request.denied', async (t) => {
  const log = auditLog();
  const w = await gatewayWorld(t, {}, { logger: log.logger });
  log.lines.length = 0;
  t.equal((await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': w.reader } })).status, 200);
  t.equal((await rawRequest(w.port, { method: 'POST', path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': w.reader, 'user-agent': 'curl/8' } })).status, 403);
  t.equal((await rawRequest(w.port, { path: '/echo/v1/x', headers: { 'x-auth-token': `${w.member}x` } })).status, 401);
  t.equal((await rawRequest(w.port, { path: '/echo/v1/x' })).status, 401);
  const denied = log.notifications();
  const reader = (await w.testApp.call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': w.reader })).json().token;
  t.match(denied, [
    {
      event_type: 'gateway.request.denied',
      payload: {
        action: 'create',
        outcome: 'failure',
        initiator: { user_id: reader.user.id, project_id: w.projectId, host: { address: '127.0.0.1', agent: 'curl/8' }, request_id: /^req-/ },
        target: { typeURI: 'service/echo', id: 'echo' },
        reason: { reasonType: 'no rule allows', reasonCode: '403' },
        requestPath: `/echo/v1/${w.projectId}/things`,
        token_audit_id: reader.audit_ids[0],
      },
    },
    { event_type: 'gateway.request.denied', payload: { action: 'read', reason: { reasonType: 'invalid token', reasonCode: '401' } } },
    { event_type: 'gateway.request.denied', payload: { reason: { reasonType: 'no token', reasonCode: '401' } } },
  ]);
  t.equal(denied.length, 3, 'an allowed request is not a security event');
});

t.test('with REDIS_URL every event also goes to the Redis stream', async (t) => {
  const redis = await testRedis(t);
  if (!redis) return t.plan(0, 'no Redis');
  const log = auditLog();
  const stream = `${redis.prefix}audit`;
  const app = await startTestApp(
    t,
    { REDIS_URL: 'redis://127.0.0.1:6379', AUDIT_STREAM: stream, RATE_LIMIT_KEY_PREFIX: `${redis.prefix}ratelimit:` },
    { logger: log.logger },
  );
  await app.login({ name: 'admin', domain: { id: 'default' } }, 'wrong');
  await app.login({ name: 'admin', domain: { id: 'default' } }, ADMIN_PASSWORD);
  const logged = log.notifications();
  // XADD is fire-and-forget on another connection: wait until everything logged has arrived.
  let entries: [string, string[]][] = [];
  for (let attempt = 0; attempt < 200 && entries.length < logged.length; attempt++) {
    entries = await redis.redis.xrange(stream, '-', '+');
    if (entries.length < logged.length) await new Promise((resolve) => setImmediate(resolve));
  }
  t.equal(entries.length, logged.length, 'one stream entry per logged event');
  const streamed = entries.map(([, fields]) => {
    const record = Object.fromEntries([[fields[0], fields[1]], [fields[2], fields[3]]]) as { event_type: string; notification: string };
    return { eventType: record.event_type, notification: JSON.parse(record.notification) as AuditNotification };
  });
  t.same(
    streamed.map((entry) => entry.notification.message_id),
    logged.map((event) => event.message_id),
    'the same events, in order',
  );
  t.ok(streamed.every((entry) => entry.eventType === entry.notification.event_type));
  t.match(streamed.at(-1)!.notification.payload, { action: 'authenticate', outcome: 'success' });
});

t.test('audit lines are written whatever LOG_LEVEL hides', async (t) => {
  const lines: string[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => lines.push(line) });
  const app = await startTestApp(t, { LOG_LEVEL: 'warn' }, { logger });
  lines.length = 0;
  await app.login({ name: 'admin', domain: { id: 'default' } }, 'wrong');
  const messages = lines.map((line) => JSON.parse(line).msg);
  t.same(messages, ['audit'], 'the audit event, and no info-level request lines');
});

t.test('credentials: identity.credential.created and deleted (an update sends none, as Keystone)', async (t) => {
  const log = auditLog();
  const app = await startTestApp(t, {}, { logger: log.logger });
  const token = (await app.call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': app.adminToken })).json().token;
  log.lines.length = 0;
  const cert = (await app.call('POST', '/v3/credentials', { credential: { type: 'cert', blob: 'secret-blob', user_id: token.user.id } })).json().credential;
  await app.call('PATCH', `/v3/credentials/${cert.id}`, { credential: { blob: 'other-blob' } });
  await app.call('DELETE', `/v3/credentials/${cert.id}`);
  const ec2 = (await app.call('POST', `/v3/users/${token.user.id}/credentials/OS-EC2`, { tenant_id: token.project.id })).json().credential;
  await app.call('DELETE', `/v3/users/${token.user.id}/credentials/OS-EC2/${ec2.access}`);
  const ec2Id = (await import('node:crypto')).createHash('sha256').update(ec2.access).digest('hex');
  const events = log.notifications().filter((event) => event.event_type.startsWith('identity.credential.'));
  t.match(events, [
    { event_type: 'identity.credential.created', payload: { action: 'created.credential', target: { id: cert.id }, initiator: { user_id: token.user.id } } },
    { event_type: 'identity.credential.deleted', payload: { target: { id: cert.id } } },
    { event_type: 'identity.credential.created', payload: { target: { id: ec2Id } } },
    { event_type: 'identity.credential.deleted', payload: { target: { id: ec2Id } } },
  ]);
  t.equal(events.length, 4);
  t.notOk(log.lines.some((line) => line.includes('secret-blob') || line.includes('other-blob') || line.includes(ec2.secret)), 'no blob or secret in the log');
});
