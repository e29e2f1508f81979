import t from 'tap';
import { ApplicationCredentialEntity } from '../../src/store/entities.ts';
import { ADMIN_PASSWORD, startTestApp } from '../helpers/app.ts';

// Keystone 22's answers (asked 2026-11-25): application credential expires_at keeps the input's
// microseconds (truncating further digits), renders naive with six digits, and parses the input the
// way keystone.common.utils.parse_expiration_date does (a Z is appended unless the text ends in Z, so
// any zone offset is refused).
const YEAR = 2099;
const ACCEPTED: [string, string][] = [
  [`${YEAR}-11-25T00:03:46.329761Z`, `${YEAR}-11-25T00:03:46.329761`],
  [`${YEAR}-11-25T00:03:46Z`, `${YEAR}-11-25T00:03:46.000000`],
  [`${YEAR}-11-25T00:03:46.329761`, `${YEAR}-11-25T00:03:46.329761`],
  [`${YEAR}-11-25T00:03:46.3297619Z`, `${YEAR}-11-25T00:03:46.329761`],
  [`${YEAR}-11-25T00:03:46.9999999Z`, `${YEAR}-11-25T00:03:46.999999`],
  [`${YEAR}-11-25T00:03:46.3Z`, `${YEAR}-11-25T00:03:46.300000`],
  [`${YEAR}-11-25T00:03:46.57Z`, `${YEAR}-11-25T00:03:46.570000`],
  [`${YEAR}-11-25T00:03:46.000001`, `${YEAR}-11-25T00:03:46.000001`],
  [`${YEAR}-11-25T00:03`, `${YEAR}-11-25T00:03:00.000000`],
  [`${YEAR}-11-25 00:03:46.5`, `${YEAR}-11-25T00:03:46.500000`],
  [`${YEAR}-11-25T00:03:46,5Z`, `${YEAR}-11-25T00:03:46.500000`],
  [`${YEAR}1125T000346Z`, `${YEAR}-11-25T00:03:46.000000`],
  [`${YEAR}-1-5T01:03:46Z`, `${YEAR}-01-05T01:03:46.000000`],
];
const REFUSED = [
  `${YEAR}-11-25T00:03:46.329761+02:00`,
  `${YEAR}-11-25T00:03:46.329761+00:00`,
  `${YEAR}-11-25T00:03:46.329761-05:30`,
  `${YEAR}-11-25T00:03:46+0200`,
  `${YEAR}-11-25T00:03:46.329761z`,
  `${YEAR}-11-25`,
  `${YEAR}-11-25T24:00:00Z`,
  `${YEAR}-13-25T00:00:00Z`,
  `${YEAR}-11-25T00:03:60Z`,
  `${YEAR}-11-25T1:03:46Z`,
  `${YEAR}-02-30T00:00:00Z`,
  'garbage',
];
const FORMAT_MESSAGE =
  'Timestamp not in expected format. The server could not comply with the request since it is either malformed or otherwise incorrect. The client is assumed to be in error.';

t.test('application credential expires_at round-trips microseconds as Keystone does', async (t) => {
  const { call, login, app } = await startTestApp(t);
  const roles = Object.fromEntries((await call('GET', '/v3/roles')).json().roles.map((r: { name: string; id: string }) => [r.name, r.id]));
  const project = (await call('POST', '/v3/projects', { project: { name: 'stamps' } })).json().project;
  const user = (await call('POST', '/v3/users', { user: { name: 'stamper', password: 'Pw-1' } })).json().user;
  await call('PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${roles.member}`);
  const session = (await login({ id: user.id }, 'Pw-1', { project: { id: project.id } })).token;
  const base = `/v3/users/${user.id}/application_credentials`;

  let n = 0;
  for (const [input, output] of ACCEPTED) {
    const created = await call('POST', base, { application_credential: { name: `c${n++}`, expires_at: input } }, session);
    t.equal(created.statusCode, 201, input);
    t.equal(created.json().application_credential.expires_at, output, `${input} on create`);
    const id = created.json().application_credential.id;
    t.equal((await call('GET', `${base}/${id}`, undefined, session)).json().application_credential.expires_at, output, `${input} on read`);
  }
  const listed = (await call('GET', `${base}?name=c0`, undefined, session)).json().application_credentials;
  t.equal(listed[0].expires_at, ACCEPTED[0]![1], 'listed with its microseconds');
  const row = await app.store.reader().findOne(ApplicationCredentialEntity, { name: 'c0' });
  t.equal(row?.expiresAt?.toISOString(), `${YEAR}-11-25T00:03:46.329Z`, 'the timestamptz column keeps the instant');

  for (const input of REFUSED) {
    const refused = await call('POST', base, { application_credential: { name: `r${n++}`, expires_at: input } }, session);
    t.equal(refused.statusCode, 400, input);
    t.equal(refused.json().error.message, FORMAT_MESSAGE, input);
  }
  const past = await call('POST', base, { application_credential: { name: 'past', expires_at: '2020-01-01T00:00:00Z' } }, session);
  t.equal(past.statusCode, 400);
  t.equal(
    past.json().error.message,
    "The 'expires_at' must not be before now. The server could not comply with the request since it is either malformed or otherwise incorrect. The client is assumed to be in error.",
  );
  const none = await call('POST', base, { application_credential: { name: 'none', expires_at: null } }, session);
  t.equal(none.json().application_credential.expires_at, null);
  t.equal((await call('POST', base, { application_credential: { name: 'number', expires_at: 12345 } }, session)).statusCode, 400);
});

t.test('token and revocation event times: whole seconds, six zero digits, Z', async (t) => {
  const { call, login } = await startTestApp(t);
  const issued = await login({ name: 'admin', domain: { name: 'Default' } }, ADMIN_PASSWORD, { project: { name: 'admin', domain: { name: 'Default' } } });
  const shape = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000000Z$/;
  t.match(issued.body.token.expires_at, shape);
  t.match(issued.body.token.issued_at, shape);
  const validated = (await call('GET', '/v3/auth/tokens', undefined, issued.token, { 'x-subject-token': issued.token })).json().token;
  t.equal(validated.expires_at, issued.body.token.expires_at);
  t.equal(validated.issued_at, issued.body.token.issued_at);
  t.equal(validated.user.password_expires_at, null);

  // Keystone 22's event for a revoked token: its audit id and two such times, no expires_at.
  t.equal((await call('DELETE', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': issued.token })).statusCode, 204);
  const events = (await call('GET', '/v3/OS-REVOKE/events')).json().events as Record<string, string>[];
  const event = events.find((candidate) => candidate.audit_id === issued.body.token.audit_ids[0]);
  t.same(Object.keys(event ?? {}).sort(), ['audit_id', 'issued_before', 'revoked_at']);
  t.match(event?.issued_before, shape);
  t.match(event?.revoked_at, shape);
});
