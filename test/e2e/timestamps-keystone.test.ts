import t, { type Test } from 'tap';
import { ADMIN_PASSWORD, startTestApp } from '../helpers/app.ts';
import { call, passwordAuth } from '../helpers/keystone-client.ts';
import { PEER_PASSWORD, PEER_URL, peerUp } from '../helpers/keystone-peer.ts';

// Timestamp formats, over HTTP, against this service and against the real Keystone 22
// (../shared/peers/keystone/start.sh; that half is skipped without a peer): the same requests must
// get the same statuses and the same texts.

const EXPIRY_INPUTS = [
  '2099-11-25T00:03:46.329761Z',
  '2099-11-25T00:03:46Z',
  '2099-11-25T00:03:46.329761',
  '2099-11-25T00:03:46.3297619Z',
  '2099-11-25T00:03:46.57Z',
  '2099-11-25T00:03',
  '2099-11-25 00:03:46.5',
  '2099-11-25T00:03:46.329761+02:00',
  '2099-11-25T00:03:46.329761+00:00',
  '2099-11-25',
  '2099-02-30T00:00:00Z',
  'garbage',
  '2020-01-01T00:00:00Z',
];

interface Observed {
  /** Per input: status, then expires_at as created and as read back, or the error message. */
  expiries: [string, number, string][];
  tokenTimes: { issue: boolean; validate: boolean; same: boolean };
  /** The keys of a revoked token's event, and whether its times have Keystone's form. */
  event: { keys: string[]; times: boolean };
  badSince: number;
}

const TOKEN_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000000Z$/;

async function scenario(base: string, adminPassword: string): Promise<Observed> {
  const suffix = `timestamps-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const adminAuth = passwordAuth({ name: 'admin', domainId: 'default' }, adminPassword, { project: { name: 'admin', domain: { id: 'default' } } });
  const adminLogin = await call(`${base}/v3/auth/tokens`, { method: 'POST', body: adminAuth });
  if (adminLogin.status !== 201) throw new Error(`admin login: ${adminLogin.status}`);
  const admin = adminLogin.token;
  const api = (method: string, path: string, body?: unknown, subject?: string) =>
    call(`${base}${path}`, { method, token: admin, ...(body === undefined ? {} : { body }), ...(subject ? { subject } : {}) });
  const userId = adminLogin.body.token.user.id;
  const credentials = `/v3/users/${userId}/application_credentials`;

  const expiries: Observed['expiries'] = [];
  const created: string[] = [];
  let n = 0;
  for (const input of EXPIRY_INPUTS) {
    const answer = await api('POST', credentials, { application_credential: { name: `${suffix}-${n++}`, expires_at: input } });
    if (answer.status === 201) {
      const id = answer.body.application_credential.id;
      created.push(id);
      const read = await api('GET', `${credentials}/${id}`);
      expiries.push([input, answer.status, `${answer.body.application_credential.expires_at} / ${read.body.application_credential.expires_at}`]);
    } else {
      expiries.push([input, answer.status, answer.body?.error?.message]);
    }
  }
  for (const id of created) await api('DELETE', `${credentials}/${id}`);

  const issued = await call(`${base}/v3/auth/tokens`, { method: 'POST', body: adminAuth });
  const validated = await api('GET', '/v3/auth/tokens', undefined, issued.token);
  const tokenTimes = {
    issue: TOKEN_TIME.test(issued.body.token.expires_at) && TOKEN_TIME.test(issued.body.token.issued_at),
    validate: TOKEN_TIME.test(validated.body.token.expires_at) && TOKEN_TIME.test(validated.body.token.issued_at),
    same: issued.body.token.expires_at === validated.body.token.expires_at && issued.body.token.issued_at === validated.body.token.issued_at,
  };

  await api('DELETE', '/v3/auth/tokens', undefined, issued.token);
  const auditId = issued.body.token.audit_ids[0];
  const events = (await api('GET', '/v3/OS-REVOKE/events')).body.events as Record<string, string>[];
  const revoked = events.find((event) => event.audit_id === auditId) ?? {};
  const event = { keys: Object.keys(revoked).sort(), times: TOKEN_TIME.test(revoked.issued_before ?? '') && TOKEN_TIME.test(revoked.revoked_at ?? '') };
  const badSince = (await api('GET', '/v3/OS-REVOKE/events?since=garbage')).status;
  return { expiries, tokenTimes, event, badSince };
}

const FORMAT = 'Timestamp not in expected format. The server could not comply with the request since it is either malformed or otherwise incorrect. The client is assumed to be in error.';

function checkCommon(t: Test, observed: Observed): void {
  t.same(observed.expiries, [
    ['2099-11-25T00:03:46.329761Z', 201, '2099-11-25T00:03:46.329761 / 2099-11-25T00:03:46.329761'],
    ['2099-11-25T00:03:46Z', 201, '2099-11-25T00:03:46.000000 / 2099-11-25T00:03:46.000000'],
    ['2099-11-25T00:03:46.329761', 201, '2099-11-25T00:03:46.329761 / 2099-11-25T00:03:46.329761'],
    ['2099-11-25T00:03:46.3297619Z', 201, '2099-11-25T00:03:46.329761 / 2099-11-25T00:03:46.329761'],
    ['2099-11-25T00:03:46.57Z', 201, '2099-11-25T00:03:46.570000 / 2099-11-25T00:03:46.570000'],
    ['2099-11-25T00:03', 201, '2099-11-25T00:03:00.000000 / 2099-11-25T00:03:00.000000'],
    ['2099-11-25 00:03:46.5', 201, '2099-11-25T00:03:46.500000 / 2099-11-25T00:03:46.500000'],
    ['2099-11-25T00:03:46.329761+02:00', 400, FORMAT],
    ['2099-11-25T00:03:46.329761+00:00', 400, FORMAT],
    ['2099-11-25', 400, FORMAT],
    ['2099-02-30T00:00:00Z', 400, FORMAT],
    ['garbage', 400, FORMAT],
    ['2020-01-01T00:00:00Z', 400, FORMAT.replace('Timestamp not in expected format.', "The 'expires_at' must not be before now.")],
  ]);
  t.same(observed.tokenTimes, { issue: true, validate: true, same: true }, 'token times: whole seconds, .000000Z, the same on validation');
  t.same(observed.event, { keys: ['audit_id', 'issued_before', 'revoked_at'], times: true }, 'a revoked token: its audit id and two times, no expires_at');
  t.equal(observed.badSince, 400);
}

t.test('this service: timestamp formats', async (t) => {
  const testApp = await startTestApp(t);
  await testApp.app.server.listen({ port: 0, host: '127.0.0.1' });
  const address = testApp.app.server.server.address();
  const base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  checkCommon(t, await scenario(base, ADMIN_PASSWORD));
});

const skip = (await peerUp()) ? false : `no Keystone peer at ${PEER_URL} (start ../shared/peers/keystone/start.sh)`;

t.test('Keystone 22: timestamp formats', { skip }, async (t) => {
  checkCommon(t, await scenario(PEER_URL, PEER_PASSWORD));
});
