import t from 'tap';
import { startTestApp } from '../helpers/app.ts';

t.test('a service token lets an expired user token through, within the window only', async (t) => {
  const { app, call, login, clock } = await startTestApp(t);
  const serviceRole = (await call('POST', '/v3/roles', { role: { name: 'service' } })).json().role;
  const member = (await call('GET', '/v3/roles?name=member')).json().roles[0];
  const project = (await call('POST', '/v3/projects', { project: { name: 'svc' } })).json().project;
  const nova = (await call('POST', '/v3/users', { user: { name: 'nova', password: 'Pw-1' } })).json().user;
  const plain = (await call('POST', '/v3/users', { user: { name: 'plain-service', password: 'Pw-1' } })).json().user;
  const user = (await call('POST', '/v3/users', { user: { name: 'end-user', password: 'Pw-1' } })).json().user;
  await call('PUT', `/v3/projects/${project.id}/users/${nova.id}/roles/${serviceRole.id}`);
  await call('PUT', `/v3/projects/${project.id}/users/${plain.id}/roles/${member.id}`);
  await call('PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${member.id}`);
  const userToken = (await login({ id: user.id }, 'Pw-1', { project: { id: project.id } })).token;

  clock.advance(3601_000);
  const serviceToken = (await login({ id: nova.id }, 'Pw-1', { project: { id: project.id } })).token;
  const memberServiceToken = (await login({ id: plain.id }, 'Pw-1', { project: { id: project.id } })).token;
  const tokens = app.tokens;

  await t.rejects(tokens.validateWithServiceToken(userToken, undefined), { name: 'NotFoundError', message: 'Failed to validate token' }, 'expired without a service token');
  const allowed = await tokens.validateWithServiceToken(userToken, serviceToken);
  t.equal(allowed.user.user.id, user.id);
  t.equal(allowed.service?.user.id, nova.id);
  t.equal(allowed.privileged, true, 'a service token with the service role is privileged');
  const fresh = (await login({ id: user.id }, 'Pw-1', { project: { id: project.id } })).token;
  const unprivileged = await tokens.validateWithServiceToken(fresh, memberServiceToken);
  t.equal(unprivileged.service?.user.id, plain.id, 'a valid service token without the role is still a service token');
  t.equal(unprivileged.privileged, false, 'but grants nothing');
  await t.rejects(tokens.validateWithServiceToken(userToken, memberServiceToken), { name: 'NotFoundError', message: 'Failed to validate token' }, 'a service token without the service role does not extend');
  await t.rejects(tokens.validateWithServiceToken(userToken, 'garbage'), { name: 'NotFoundError' }, 'an invalid service token is refused');

  // The service user's application credentials: one with access rules lifts nothing, one without does.
  const credentialToken = async (name: string, accessRules?: unknown[]) => {
    const created = await call(
      'POST',
      `/v3/users/${nova.id}/application_credentials`,
      { application_credential: { name, ...(accessRules ? { access_rules: accessRules } : {}) } },
      serviceToken,
    );
    t.equal(created.statusCode, 201, created.body);
    const { id, secret } = created.json().application_credential;
    const issued = await call('POST', '/v3/auth/tokens', { auth: { identity: { methods: ['application_credential'], application_credential: { id, secret } } } }, null);
    t.equal(issued.statusCode, 201);
    return String(issued.headers['x-subject-token']);
  };
  const ruled = await credentialToken('svc-ruled', [{ service: 'compute', method: 'GET', path: '/v2.1/servers' }]);
  const ruledAnswer = await tokens.validateWithServiceToken(fresh, ruled);
  t.equal(ruledAnswer.service?.user.id, nova.id);
  t.equal(ruledAnswer.privileged, false, 'a service token of a credential with access rules is not privileged, service role or not');
  await t.rejects(tokens.validateWithServiceToken(userToken, ruled), { name: 'NotFoundError', message: 'Failed to validate token' }, 'and does not extend');
  const unruled = await credentialToken('svc-unruled');
  t.equal((await tokens.validateWithServiceToken(fresh, unruled)).privileged, true, 'one without access rules keeps the service role');

  clock.advance(172_800_000);
  const laterService = (await login({ id: nova.id }, 'Pw-1', { project: { id: project.id } })).token;
  await t.rejects(tokens.validateWithServiceToken(userToken, laterService), { name: 'NotFoundError', message: 'Failed to validate token' }, 'beyond the 48 h allow_expired window');
});
