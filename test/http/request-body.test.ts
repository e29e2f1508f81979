import { pino } from 'pino';
import t from 'tap';
import { startTestApp } from '../helpers/app.ts';

// What the identity API accepts as a JSON body: nesting a client cannot use to exhaust the stack,
// only well-formed text (valid UTF-8, no lone surrogates, no NUL), and a small body on the routes
// anyone may call without a token. Every refusal is Keystone-shaped, never a 500.

const INVALID_JSON =
  'Expecting to find valid JSON in request body. The server could not comply with the request since it is either ' +
  'malformed or otherwise incorrect. The client is assumed to be in error.';

function nested(depth: number, open = '[', close = ']'): string {
  return `${open.repeat(depth)}${close.repeat(depth)}`;
}

t.test('nesting deeper than the limit is a 400, checked without recursion', async (t) => {
  const lines: string[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => lines.push(line) });
  const app = await startTestApp(t, {}, { logger });
  lines.length = 0; // what start-up said (e.g. settings warnings) is not a request's
  const post = (url: string, payload: string, token: string | null = null) =>
    app.request({
      method: 'POST',
      url,
      headers: { 'content-type': 'application/json', ...(token ? { 'x-auth-token': token } : {}) },
      payload,
    });

  for (const depth of [10_000, 30_000]) {
    const response = await post('/v3/auth/tokens', `{"auth": {"x": ${nested(depth)}}}`);
    t.equal(response.statusCode, 400, `${depth} levels of arrays without a token`);
    t.same(response.json(), { error: { code: 400, title: 'Bad Request', message: 'Invalid input: the JSON body is nested more than 32 levels deep.' } });
  }
  const objects = `{"auth": ${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}}`;
  t.equal((await post('/v3/auth/tokens', objects)).statusCode, 400, 'objects nest the same way');
  const authenticated = await post('/v3/users', `{"user": {"name": "deep", "extra": ${nested(40)}}}`, app.adminToken);
  t.equal(authenticated.statusCode, 400, 'authenticated routes too');
  const deepest = await post('/v3/users', `{"user": {"name": "deep", "extra": ${nested(400_000)}}}`, app.adminToken);
  t.equal(deepest.statusCode, 400, '400,000 levels within BODY_LIMIT_BYTES');

  // Brackets inside strings are text, not nesting; escaped quotes do not end a string.
  const inString = await post('/v3/users', JSON.stringify({ user: { name: `n${'[{'.repeat(50)}\\"${'['.repeat(50)}` } }), app.adminToken);
  t.equal(inString.statusCode, 201, 'brackets in a string are not nesting');
  const atLimit = await post('/v3/users', JSON.stringify({ user: { name: 'at-limit', extra_thing: JSON.parse(nested(30)) } }), app.adminToken);
  t.equal(atLimit.statusCode, 201, '32 levels are accepted');
  t.same(lines, [], 'nothing was logged: no stack trace per request');
});

t.test('text that is not what it seems is a 400', async (t) => {
  const app = await startTestApp(t);
  const post = (url: string, payload: string | Buffer, token: string | null = app.adminToken) =>
    app.request({
      method: 'POST',
      url,
      headers: { 'content-type': 'application/json', ...(token ? { 'x-auth-token': token } : {}) },
      payload,
    });

  const surrogate = await post('/v3/users', '{"user": {"name": "sg\\ud800z"}}');
  t.equal(surrogate.statusCode, 400, 'a lone high surrogate in a value');
  t.same(surrogate.json(), { error: { code: 400, title: 'Bad Request', message: 'Invalid input: the JSON body contains a lone UTF-16 surrogate.' } });
  t.equal((await post('/v3/users', '{"user": {"name": "sg\\udc00"}}')).statusCode, 400, 'a lone low surrogate');
  t.equal((await post('/v3/users', '{"user": {"name": "ok", "x\\udfffy": 1}}')).statusCode, 400, 'in a key');
  t.equal((await post('/v3/users', '{"user": {"name": "ok", "tags": [["\\ud800"]]}}')).statusCode, 400, 'inside arrays');
  t.equal((await post('/v3/auth/tokens', '{"auth": {"identity": {"methods": ["password"], "password": {"user": {"name": "\\ud800", "domain": {"id": "default"}, "password": "x"}}}}}', null)).statusCode, 400, 'on the token route');
  const listed = (await app.call('GET', '/v3/users?name=sg%EF%BF%BDz')).json().users;
  t.same(listed, [], 'nothing was stored');

  const pair = await post('/v3/users', '{"user": {"name": "emoji-\\ud83d\\ude00"}}');
  t.equal(pair.statusCode, 201, 'a surrogate pair is a character');
  t.equal(pair.json().user.name, 'emoji-😀');

  // Invalid UTF-8: a lone continuation byte, an overlong form, an encoded surrogate, a truncated sequence.
  for (const bytes of [[0x80], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xe2, 0x82]]) {
    const payload = Buffer.concat([Buffer.from('{"user": {"name": "bad'), Buffer.from(bytes), Buffer.from('"}}')]);
    const response = await post('/v3/users', payload);
    t.equal(response.statusCode, 400, `bytes ${bytes.map((byte) => byte.toString(16)).join(' ')}`);
    t.same(response.json(), { error: { code: 400, title: 'Bad Request', message: 'Invalid input: the request body is not valid UTF-8.' } });
  }
  const badToken = await post('/v3/auth/tokens', Buffer.concat([Buffer.from('{"auth": {"x": "'), Buffer.from([0xff]), Buffer.from('"}}')]), null);
  t.equal(badToken.statusCode, 400, 'invalid UTF-8 without a token');
  t.same((await app.call('GET', '/v3/users?name=bad%EF%BF%BD')).json().users, [], 'nothing stored with U+FFFD');

  const utf8 = await post('/v3/users', Buffer.from('{"user": {"name": "Jürgen 李"}}', 'utf8'));
  t.equal(utf8.statusCode, 201, 'valid UTF-8 beyond ASCII');
  t.equal(utf8.json().user.name, 'Jürgen 李');
  t.equal((await post('/v3/users', '{"user": {"name": "nul\\u0000"}}')).statusCode, 400, 'NUL is still refused');
  t.equal((await post('/v3/users', '{"user": {"name": "x", "k\\u0000": 1}}')).statusCode, 400, 'NUL in a key is still refused');
});

t.test('the routes anyone may call take small bodies', async (t) => {
  const app = await startTestApp(t);
  const user = (await app.call('POST', '/v3/users', { user: { name: 'changer', password: 'Pw-1' } })).json().user;
  const padded = (size: number) => {
    const body = { auth: { identity: { methods: ['password'], password: { user: { name: 'admin', domain: { id: 'default' }, password: 'admin-secret' } } } }, padding: '' };
    body.padding = 'x'.repeat(size - JSON.stringify(body).length);
    return JSON.stringify(body);
  };
  const issue = (payload: string) => app.request({ method: 'POST', url: '/v3/auth/tokens', headers: { 'content-type': 'application/json' }, payload });

  t.equal(padded(65_536).length, 65_536);
  t.equal((await issue(padded(65_536))).statusCode, 201, 'a body of exactly the limit');
  const over = await issue(padded(65_537));
  t.equal(over.statusCode, 413, 'one byte more');
  t.same(over.json(), { error: { code: 413, title: 'Payload Too Large', message: 'The request body is larger than this server accepts.' } });
  t.equal((await issue(padded(1_000_000))).statusCode, 413, 'a megabyte (under BODY_LIMIT_BYTES)');

  const change = await app.request({
    method: 'POST',
    url: `/v3/users/${user.id}/password`,
    headers: { 'content-type': 'application/json' },
    payload: JSON.stringify({ user: { original_password: 'Pw-1', password: 'Pw-2' }, padding: 'x'.repeat(70_000) }),
  });
  t.equal(change.statusCode, 413, 'the self-service password change');
  t.equal((await app.login({ id: user.id }, 'Pw-1')).status, 201, 'the password did not change');

  const big = await app.call('POST', '/v3/users', { user: { name: 'big', description: 'x'.repeat(200_000) } });
  t.not(big.statusCode, 413, 'authenticated routes keep BODY_LIMIT_BYTES');
});

t.test('PUBLIC_BODY_LIMIT_BYTES sets the limit of the routes anyone may call', async (t) => {
  const app = await startTestApp(t, { PUBLIC_BODY_LIMIT_BYTES: '2048' });
  const payload = JSON.stringify({ auth: { identity: { methods: ['password'], password: { user: { name: 'admin', domain: { id: 'default' }, password: 'x'.repeat(2100) } } } } });
  const response = await app.request({ method: 'POST', url: '/v3/auth/tokens', headers: { 'content-type': 'application/json' }, payload });
  t.equal(response.statusCode, 413);
});
