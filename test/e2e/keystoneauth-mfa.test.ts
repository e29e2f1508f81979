import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import t from 'tap';
import { totpPasscode } from '../../src/token/totp.ts';
import { startTestApp } from '../helpers/app.ts';
import { ensureDebianPackages } from '../helpers/debian-packages.ts';

// keystoneauth1 (Debian python3-keystoneauth1), as OpenStack clients use it, against a listening
// server: the v3multifactor plugin (password + totp in one request), and the MissingAuthMethods
// it raises from a receipt 401 when only the password is given.

const run = promisify(execFile);
const SEED = Buffer.from('12345678901234567890');
const SECRET = 'GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ';

const SCRIPT = `
import json, sys
from keystoneauth1 import session, exceptions
from keystoneauth1.identity import v3
args = json.loads(sys.argv[1])
out = {}
mfa = v3.MultiFactor(auth_url=args['url'], auth_methods=['v3password', 'v3totp'], username=args['user'], user_domain_id='default',
                     password=args['password'], passcode=args['passcode'], project_id=args['project'])
ref = mfa.get_access(session.Session())
out['multifactor'] = {'methods': ref._data['token']['methods'], 'project': ref.project_id, 'user': ref.user_id}
try:
    v3.Password(auth_url=args['url'], username=args['user'], user_domain_id='default', password=args['password']).get_access(session.Session())
    out['password'] = 'token'
except exceptions.MissingAuthMethods as error:
    out['password'] = {'receipt': bool(error.receipt), 'methods': error.methods, 'required': error.required_auth_methods}
print(json.dumps(out))
`;

t.test('keystoneauth1 v3multifactor: password + totp; password alone raises MissingAuthMethods', async (t) => {
  ensureDebianPackages(['python3-keystoneauth1']);
  const test = await startTestApp(t, { PUBLIC_URL: '' });
  const { app, call } = test;
  await app.server.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.server.address();
  const base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  const project = (await call('POST', '/v3/projects', { project: { name: 'mfa-ksa' } })).json().project;
  const user = (await call('POST', '/v3/users', { user: { name: 'mfa-ksa-user', password: 'Pw-ksa-1', options: { multi_factor_auth_rules: [['password', 'totp']] } } })).json().user;
  const member = (await call('GET', '/v3/roles?name=member')).json().roles[0];
  await call('PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${member.id}`);
  t.equal((await call('POST', '/v3/credentials', { credential: { type: 'totp', blob: SECRET, user_id: user.id } })).statusCode, 201);

  // The service's clock is the test's: the passcode is computed for it.
  const args = { url: `${base}/v3`, user: 'mfa-ksa-user', password: 'Pw-ksa-1', passcode: totpPasscode(SEED, test.clock.now() / 1000), project: project.id };
  const { stdout } = await run('/usr/bin/python3', ['-c', SCRIPT, JSON.stringify(args)], { encoding: 'utf8', timeout: 60_000 });
  const out = JSON.parse(stdout);
  t.same(out.multifactor, { methods: ['totp', 'password'], project: project.id, user: user.id });
  t.same(out.password, { receipt: true, methods: ['password'], required: [['password', 'totp']] });
});
