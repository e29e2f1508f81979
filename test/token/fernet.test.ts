import { createCipheriv, createHmac, randomBytes } from 'node:crypto';
import { decode as decodeMsgpack } from '@msgpack/msgpack';
import t from 'tap';
import { FernetKeys, InvalidFernetTokenError } from '../../src/token/fernet.ts';
import { InvalidTokenPayloadError, newAuditId, PayloadCodec, uuidBytes, type TokenPayload } from '../../src/token/fernet-payload.ts';

const DEFAULT_METHODS = ['external', 'password', 'token', 'oauth1', 'mapped', 'application_credential'];
const codec = new PayloadCodec({ methods: DEFAULT_METHODS, defaultDomainId: 'default' });

// §4.7: a repository with the single key 0x00..0x1f.
const VECTOR_KEY = Buffer.from('AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=', 'base64url');
const vectorKeys = new FernetKeys([VECTOR_KEY]);
const VECTOR_TIMESTAMP = 1700000000;
const VECTOR_EXPIRES_AT = Date.parse('2023-11-14T23:13:20.000Z') / 1000;
const VECTOR_AUDIT_ID = 'AwdcuEO7T1m2vxpAA48JWw';

const vectors = [
  {
    name: 'A (project scoped)',
    iv: Buffer.alloc(16, 0x11),
    payloadHex:
      '960292c3c4104e7d7a6f73a64d1fa30f8cdf8d9f5b680292c3c4100110066fc90041ce8bdc62afa0378514cb41d954ffc400000091c41003075cb843bb4f59b6bf1a40038f095b',
    token:
      'gAAAAABlU_EAERERERERERERERERERERERb7X5e1wNFAeA73xw6a_t5ipggBVlW4zPo8FbnEHkHz0EOiEXaUJel4V3dDjJ10khWcgvef_hpMrZ4qSWe3ibCGyyT3UupqRVr75AHi1bBeOPO2w59WUj0_74IIAvbuKWwr5JqHer2iWKRsXdlBS9g',
    payload: {
      userId: '4e7d7a6f73a64d1fa30f8cdf8d9f5b68',
      methods: ['password'],
      expiresAt: VECTOR_EXPIRES_AT,
      auditIds: [VECTOR_AUDIT_ID],
      scope: { type: 'project', projectId: '0110066fc90041ce8bdc62afa0378514' },
    } satisfies TokenPayload,
  },
  {
    name: 'B (unscoped, non-UUID user id)',
    iv: Buffer.alloc(16, 0x22),
    payloadHex: '950092c2af61646d696e2d6c6461702d7573657202cb41d954ffc400000091c41003075cb843bb4f59b6bf1a40038f095b',
    token:
      'gAAAAABlU_EAIiIiIiIiIiIiIiIiIiIiIioXzW7AupyPpV-Wz3rCNLL7xj0UgF-vLWc7Bk-XXiBZm379zorVA3YTCv5XmPlZ7PA3LVnNO1JEMukP9fBAx4f9IYEKzHoiuY1_Vd8DHlSlWcYR7iV7wowm9Vq15fQ07w',
    payload: {
      userId: 'admin-ldap-user',
      methods: ['password'],
      expiresAt: VECTOR_EXPIRES_AT,
      auditIds: [VECTOR_AUDIT_ID],
      scope: { type: 'unscoped' },
    } satisfies TokenPayload,
  },
];

/** Re-signs raw token bytes with `key`, so tests can reach the checks that follow the HMAC. */
function signRaw(key: Buffer, signed: Buffer): string {
  const mac = createHmac('sha256', key.subarray(0, 16)).update(signed).digest();
  return Buffer.concat([signed, mac]).toString('base64url');
}

function rawOf(token: string): Buffer {
  return Buffer.from(token, 'base64url');
}

function float64Hex(value: number): string {
  const bytes = Buffer.alloc(8);
  bytes.writeDoubleBE(value);
  return `cb${bytes.toString('hex')}`;
}

function uuidHex(): string {
  return randomBytes(16).toString('hex');
}

for (const vector of vectors) {
  t.test(`vector ${vector.name}`, async (t) => {
    const { plaintext, timestampSeconds } = vectorKeys.decrypt(vector.token);
    t.equal(timestampSeconds, VECTOR_TIMESTAMP);
    t.equal(new Date(timestampSeconds * 1000).toISOString(), '2023-11-14T22:13:20.000Z');
    t.equal(plaintext.toString('hex'), vector.payloadHex);
    t.strictSame(codec.decode(plaintext), vector.payload);

    t.equal(codec.encode(vector.payload).toString('hex'), vector.payloadHex, 'encoding reproduces the payload bytes');
    t.equal(vectorKeys.encrypt(Buffer.from(vector.payloadHex, 'hex'), VECTOR_TIMESTAMP, vector.iv), vector.token, 'encryption reproduces the token');
    t.equal(vectorKeys.encrypt(codec.encode(vector.payload), VECTOR_TIMESTAMP, vector.iv), vector.token);
  });
}

t.test('the key is found in any position of the key list and padded tokens are accepted', async (t) => {
  const keys = new FernetKeys([randomBytes(32), randomBytes(32), VECTOR_KEY]);
  const token = vectors[0]!.token;
  t.equal(keys.decrypt(token).plaintext.toString('hex'), vectors[0]!.payloadHex);
  const padded = token + '='.repeat((4 - (token.length % 4)) % 4);
  t.not(padded, token, 'the vector token has padding to restore');
  t.equal(keys.decrypt(padded).plaintext.toString('hex'), vectors[0]!.payloadHex);
});

t.test('encrypt uses the primary key and a random IV', async (t) => {
  const primary = randomBytes(32);
  const keys = new FernetKeys([primary, VECTOR_KEY]);
  const plaintext = Buffer.from('hello');
  const first = keys.encrypt(plaintext, 1);
  const second = keys.encrypt(plaintext, 1);
  t.not(first, second);
  t.notMatch(first, /=/);
  t.equal(new FernetKeys([primary]).decrypt(first).plaintext.toString(), 'hello');
  t.throws(() => vectorKeys.decrypt(first), InvalidFernetTokenError);
  t.throws(() => keys.encrypt(plaintext, 1.5), RangeError);
  t.throws(() => keys.encrypt(plaintext, -1), RangeError);
  t.throws(() => keys.encrypt(plaintext, 1, Buffer.alloc(15)), RangeError);
  t.throws(() => new FernetKeys([]), RangeError);
  t.throws(() => new FernetKeys([Buffer.alloc(16)]), RangeError);
});

t.test('timestamps and plaintext lengths survive a round trip', async (t) => {
  for (const timestamp of [0, 1, 2 ** 32 - 1, 2 ** 32, 2 ** 40 + 7]) {
    t.equal(vectorKeys.decrypt(vectorKeys.encrypt(Buffer.from('x'), timestamp)).timestampSeconds, timestamp);
  }
  for (const length of [0, 1, 15, 16, 17, 31, 32, 200]) {
    const plaintext = randomBytes(length);
    t.same(vectorKeys.decrypt(vectorKeys.encrypt(plaintext, 5)).plaintext, plaintext, `${length} bytes`);
  }
});

t.test('malformed or foreign tokens throw InvalidFernetTokenError', async (t) => {
  const token = vectors[0]!.token;
  const raw = rawOf(token);
  const signed = raw.subarray(0, raw.length - 32);

  const badVersion = Buffer.from(signed);
  badVersion[0] = 0x81;
  const flippedMac = Buffer.from(raw);
  flippedMac[flippedMac.length - 1]! ^= 0x01;
  const flippedCiphertext = Buffer.from(raw);
  flippedCiphertext[30]! ^= 0x80;

  // AES-CBC output whose last plaintext byte is 0: authentic, but not PKCS7.
  const badPkcs7Cipher = createCipheriv('aes-128-cbc', VECTOR_KEY.subarray(16), Buffer.alloc(16));
  badPkcs7Cipher.setAutoPadding(false);
  const badPkcs7 = Buffer.concat([signed.subarray(0, 9), Buffer.alloc(16), badPkcs7Cipher.update(Buffer.alloc(16)), badPkcs7Cipher.final()]);

  // The last character carries unused low bits; setting one must not yield a second spelling.
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  t.not(token.length % 4, 0, 'the vector token has a partial final group');
  const nonCanonical = token.slice(0, -1) + alphabet[alphabet.indexOf(token[token.length - 1]!) + 1];
  t.same(rawOf(nonCanonical), raw, 'a lenient decoder reads the same bytes');
  const padding = (4 - (token.length % 4)) % 4;

  const cases: Record<string, string> = {
    'bad version byte': signRaw(VECTOR_KEY, badVersion),
    'truncated token text': token.slice(0, -4),
    'truncated to 72 bytes': signRaw(VECTOR_KEY, raw.subarray(0, 40)),
    'ciphertext not a whole number of blocks': signRaw(VECTOR_KEY, signed.subarray(0, signed.length - 1)),
    'flipped HMAC bit': flippedMac.toString('base64url'),
    'flipped ciphertext bit': flippedCiphertext.toString('base64url'),
    'valid HMAC over bad PKCS7 padding': signRaw(VECTOR_KEY, badPkcs7),
    'one "=" too many': token + '='.repeat(padding + 1),
    'a whole group of "="': token + '='.repeat(padding + 4),
    '"=" inside the token': token.slice(0, 10) + '=' + token.slice(11),
    'impossible length': token + 'A',
    'standard base64 "+"': token.slice(0, 20) + '+' + token.slice(21),
    'standard base64 "/"': token.slice(0, 20) + '/' + token.slice(21),
    'whitespace': token + ' ',
    'non-canonical final character': nonCanonical,
    empty: '',
  };
  for (const [name, candidate] of Object.entries(cases)) {
    t.throws(() => vectorKeys.decrypt(candidate), InvalidFernetTokenError, name);
  }
  t.throws(() => new FernetKeys([randomBytes(32)]).decrypt(token), InvalidFernetTokenError, 'wrong key');
  t.throws(() => vectorKeys.decrypt(null as unknown as string), InvalidFernetTokenError, 'not a string');

  const error = t.throws(() => vectorKeys.decrypt('x')) as Error;
  t.equal(error.name, 'InvalidFernetTokenError');
  t.ok(error instanceof Error);
});

t.test('rotation: a key rotated out no longer decrypts while a secondary still does', async (t) => {
  const [oldest, middle, staged] = [randomBytes(32), randomBytes(32), randomBytes(32)];
  // Load order: primary first, staged last.
  const before = new FernetKeys([middle, oldest, staged]);
  const fromOldest = new FernetKeys([oldest]).encrypt(Buffer.from('old'), 10);
  const fromMiddle = before.encrypt(Buffer.from('middle'), 10);
  const fromStaged = new FernetKeys([staged]).encrypt(Buffer.from('staged'), 10);
  t.equal(before.decrypt(fromOldest).plaintext.toString(), 'old');
  t.equal(before.decrypt(fromStaged).plaintext.toString(), 'staged', 'a staged key already validates');

  const after = new FernetKeys([staged, middle, randomBytes(32)]);
  t.throws(() => after.decrypt(fromOldest), InvalidFernetTokenError);
  t.equal(after.decrypt(fromMiddle).plaintext.toString(), 'middle');
  t.equal(after.decrypt(fromStaged).plaintext.toString(), 'staged');
});

const ID = {
  user: uuidHex(),
  project: uuidHex(),
  domain: uuidHex(),
  trust: uuidHex(),
  group: uuidHex(),
  idp: uuidHex(),
  accessToken: uuidHex(),
  appCred: uuidHex(),
};

const scopes: TokenPayload['scope'][] = [
  { type: 'unscoped' },
  { type: 'domain', domainId: ID.domain },
  { type: 'domain', domainId: 'default' },
  { type: 'project', projectId: ID.project },
  { type: 'project', projectId: 'not-a-uuid-project' },
  { type: 'system' },
  { type: 'trust', projectId: ID.project, trustId: ID.trust },
  { type: 'application_credential', projectId: ID.project, applicationCredentialId: ID.appCred },
  { type: 'application_credential', projectId: ID.project, applicationCredentialId: 'app-cred-name' },
  { type: 'oauth1', projectId: ID.project, accessTokenId: ID.accessToken },
  { type: 'federated_unscoped', groupIds: [ID.group, 'ldap-group'], identityProviderId: 'myidp', protocolId: 'saml2' },
  { type: 'federated_unscoped', groupIds: [], identityProviderId: ID.idp, protocolId: 'openid' },
  { type: 'federated_project', projectId: ID.project, groupIds: [ID.group], identityProviderId: 'myidp', protocolId: 'mapped' },
  { type: 'federated_domain', domainId: 'default', groupIds: [ID.group], identityProviderId: ID.idp, protocolId: 'saml2' },
  { type: 'federated_domain', domainId: ID.domain, groupIds: [], identityProviderId: 'myidp', protocolId: 'saml2' },
];

t.test('every scope type survives encode → encrypt → decrypt → decode', async (t) => {
  const expectedVersions: Record<TokenPayload['scope']['type'], number> = {
    unscoped: 0,
    domain: 1,
    project: 2,
    trust: 3,
    federated_unscoped: 4,
    federated_project: 5,
    federated_domain: 6,
    oauth1: 7,
    system: 8,
    application_credential: 9,
  };
  for (const scope of scopes) {
    for (const userId of [ID.user, 'a8b1d3e5f7a9b1d3e5f7a9b1d3e5f7a9b1d3e5f7a9b1d3e5f7a9b1d3e5f7a9b1']) {
      const payload: TokenPayload = {
        userId,
        methods: ['token', 'password'],
        expiresAt: 1795347900,
        auditIds: [newAuditId(), newAuditId()],
        scope,
      };
      const plaintext = codec.encode(payload);
      t.equal((decodeMsgpack(plaintext) as unknown[])[0], expectedVersions[scope.type], `${scope.type} version`);
      const token = vectorKeys.encrypt(plaintext, 1795344300);
      const decrypted = vectorKeys.decrypt(token);
      t.equal(decrypted.timestampSeconds, 1795344300);
      t.strictSame(codec.decode(decrypted.plaintext), payload, `${JSON.stringify(scope)} with user ${userId}`);
    }
  }
});

t.test('observed Keystone layouts (§4.5)', async (t) => {
  const user = ID.user;
  const userPair = `92c3c410${user}`;
  const audit = newAuditId();
  const auditHex = Buffer.from(audit, 'base64url').toString('hex');
  const base = { userId: user, methods: ['password'], auditIds: [audit] };

  const system = codec.encode({ ...base, expiresAt: 1795347901, scope: { type: 'system' } });
  t.equal(system.toString('hex'), `9608${userPair}02a3616c6c${float64Hex(1795347901)}91c410${auditHex}`);
  const domain = codec.encode({ ...base, expiresAt: 1795347902, scope: { type: 'domain', domainId: 'default' } });
  t.equal(domain.toString('hex'), `9601${userPair}02a764656661756c74${float64Hex(1795347902)}91c410${auditHex}`, 'bare str for the default domain');
  const rescoped = codec.encode({
    ...base,
    methods: ['token', 'password'],
    auditIds: [audit, VECTOR_AUDIT_ID],
    expiresAt: 1795347903,
    scope: { type: 'project', projectId: ID.project },
  });
  t.same(decodeMsgpack(rescoped), [
    2,
    [true, Buffer.from(user, 'hex')],
    6,
    [true, Buffer.from(ID.project, 'hex')],
    1795347903,
    [Buffer.from(audit, 'base64url'), Buffer.from(VECTOR_AUDIT_ID, 'base64url')],
  ]);
  // The float follows the project id's 16 bytes (a search for its 0xcb marker could stop inside a
  // random id that holds that byte: 1 run in ~85 did).
  const expiresAt = rescoped.indexOf(Buffer.from(ID.project, 'hex')) + 16;
  t.equal(rescoped[expiresAt], 0xcb, 'expires_at is a float64');
  t.equal(rescoped.readDoubleBE(expiresAt + 1), 1795347903);
});

t.test('msgpack widths match Python msgpack', async (t) => {
  const payloadWith = (userId: string, groupIds: string[] = []): Buffer =>
    codec.encode({
      userId,
      methods: ['password'],
      expiresAt: 0,
      auditIds: [VECTOR_AUDIT_ID],
      scope: { type: 'federated_unscoped', groupIds, identityProviderId: 'idp', protocolId: 'saml2' },
    });
  // Header of the user id str: [version, [false, <str>]] starts at byte 4.
  t.equal(payloadWith('x'.repeat(31)).subarray(4, 5).toString('hex'), 'bf', 'fixstr up to 31 bytes');
  t.equal(payloadWith('x'.repeat(32)).subarray(4, 6).toString('hex'), 'd920', 'str8 from 32 bytes');
  t.equal(payloadWith('x'.repeat(255)).subarray(4, 6).toString('hex'), 'd9ff');
  t.equal(payloadWith('x'.repeat(256)).subarray(4, 7).toString('hex'), 'da0100', 'str16 from 256 bytes');
  t.equal(payloadWith('x'.repeat(70000)).subarray(4, 9).toString('hex'), 'db00011170', 'str32 from 65536 bytes');
  t.equal(payloadWith('é'.repeat(16)).subarray(4, 6).toString('hex'), 'd920', 'lengths count UTF-8 bytes');

  const manyGroups = Array.from({ length: 16 }, (_, index) => `group-${index}`);
  const encoded = payloadWith('u', manyGroups);
  t.equal(encoded.subarray(0, 1).toString('hex'), '98');
  t.ok(encoded.includes(Buffer.from('dc0010', 'hex')), 'array16 for 16 elements');
  t.same((decodeMsgpack(encoded) as unknown[])[3], manyGroups.map((group) => [false, group]));
  t.strictSame(codec.decode(encoded).scope, { type: 'federated_unscoped', groupIds: manyGroups, identityProviderId: 'idp', protocolId: 'saml2' });

  const long = 'x'.repeat(300);
  t.strictSame(codec.decode(payloadWith(long)).userId, long);
});

t.test('methods bitmask', async (t) => {
  const methodsOf = (plaintext: Buffer): bigint => BigInt((decodeMsgpack(plaintext, { useBigInt64: true }) as Array<number | bigint>)[2]!);
  // [0, [false, "u"], <methods>, …]: the methods int starts at byte 6.
  const unscoped = (methods: string[]): TokenPayload => ({ userId: 'u', methods, expiresAt: 1, auditIds: [VECTOR_AUDIT_ID], scope: { type: 'unscoped' } });

  const six = codec.encode(unscoped(['password', 'token']));
  t.equal(methodsOf(six), 6n);
  t.strictSame(codec.decode(six).methods, ['token', 'password'], 'descending bit order');
  t.equal(methodsOf(codec.encode(unscoped(['password', 'password', 'nonsense']))), 2n, 'duplicates and unknown names add nothing');
  t.equal(methodsOf(codec.encode(unscoped([]))), 0n);
  t.strictSame(codec.decode(codec.encode(unscoped([]))).methods, []);

  const withTotp = new PayloadCodec({ methods: [...DEFAULT_METHODS, 'totp'], defaultDomainId: 'default' });
  const mfa = withTotp.encode(unscoped(['password', 'totp']));
  t.equal(methodsOf(mfa), 66n, 'totp appended gets 64');
  t.strictSame(withTotp.decode(mfa).methods, ['totp', 'password']);
  t.strictSame(codec.decode(mfa).methods, [], 'an unknown bit above the known ones hides them, as in Keystone');

  const ec2 = codec.encode(unscoped(['ec2credential']));
  t.equal(methodsOf(ec2), 2n ** 32n);
  t.equal(ec2.subarray(6, 15).toString('hex'), 'cf0000000100000000', 'uint64 above 32 bits');
  t.strictSame(codec.decode(ec2).methods, ['ec2credential']);
  const oauth2 = codec.encode(unscoped(['oauth2_credential', 'ec2credential', 'external']));
  t.equal(methodsOf(oauth2), 2n ** 33n + 2n ** 32n + 1n);
  t.strictSame(codec.decode(oauth2).methods, ['oauth2_credential', 'ec2credential', 'external']);

  const wide = new PayloadCodec({ methods: Array.from({ length: 17 }, (_, index) => `m${index}`), defaultDomainId: 'default' });
  t.equal(wide.encode(unscoped(['m7'])).subarray(6, 8).toString('hex'), 'cc80', 'uint8');
  t.equal(wide.encode(unscoped(['m8'])).subarray(6, 9).toString('hex'), 'cd0100', 'uint16');
  t.equal(wide.encode(unscoped(['m16'])).subarray(6, 11).toString('hex'), 'ce00010000', 'uint32');
  t.equal(wide.encode(unscoped(['m6'])).subarray(6, 7).toString('hex'), '40', 'positive fixint');
  t.throws(() => new PayloadCodec({ methods: Array.from({ length: 33 }, (_, index) => `m${index}`), defaultDomainId: 'default' }), RangeError);
});

t.test('UUID ids follow Python uuid.UUID parsing', async (t) => {
  const hex = '4e7d7a6f73a64d1fa30f8cdf8d9f5b68';
  const dashed = '4E7D7A6F-73A6-4D1F-A30F-8CDF8D9F5B68';
  for (const form of [hex, dashed, `{${dashed}}`, `urn:uuid:${dashed}`, `urn:uuid:{${hex}}`, hex.toUpperCase()]) {
    t.equal(uuidBytes(form)?.toString('hex'), hex, form);
    const payload: TokenPayload = { userId: form, methods: [], expiresAt: 1, auditIds: [VECTOR_AUDIT_ID], scope: { type: 'unscoped' } };
    t.equal(codec.decode(codec.encode(payload)).userId, hex, `${form} is canonicalised`);
  }
  for (const form of ['default', hex.slice(1), `${hex}0`, `${hex.slice(1)}g`, 'admin-ldap-user', '']) {
    t.equal(uuidBytes(form), undefined, JSON.stringify(form));
  }
});

t.test('binary fields written as str by msgpack < 1.0 still decode', async (t) => {
  const legacy = vectors[0]!.payloadHex.replaceAll('c410', 'b0');
  t.strictSame(codec.decode(Buffer.from(legacy, 'hex')), vectors[0]!.payload);
  // [false, bin "admin-ldap-user"]: text held as bytes is decoded as UTF-8.
  const binText = vectors[1]!.payloadHex.replace('af61646d696e', 'c40f61646d696e');
  t.strictSame(codec.decode(Buffer.from(binText, 'hex')), vectors[1]!.payload);
  const legacyDomain = `9601${'92c3b0' + ID.user}02b0${ID.domain}cb41d954ffc400000091b003075cb843bb4f59b6bf1a40038f095b`;
  t.strictSame(codec.decode(Buffer.from(legacyDomain, 'hex')).scope, { type: 'domain', domainId: ID.domain });
});

t.test('malformed payloads throw InvalidTokenPayloadError', async (t) => {
  const validHex = vectors[1]!.payloadHex;
  const unknownVersion = t.throws(() => codec.decode(Buffer.from('950a' + validHex.slice(4), 'hex')), InvalidTokenPayloadError) as Error;
  t.equal(unknownVersion.message, 'This is not a recognized Fernet payload version: 10');
  t.equal(unknownVersion.name, 'InvalidTokenPayloadError');

  // The unknown version arrives inside an authentic token: Fernet accepts it, the codec does not.
  const token = vectorKeys.encrypt(Buffer.from('950a' + validHex.slice(4), 'hex'), VECTOR_TIMESTAMP);
  t.throws(() => codec.decode(vectorKeys.decrypt(token).plaintext), InvalidTokenPayloadError);

  const auditHex = '91c41003075cb843bb4f59b6bf1a40038f095b';
  const cases: Record<string, string> = {
    empty: '',
    'not an array': '00',
    'empty array': '90',
    'version is a string': '95a13092c2a17502cb41d954ffc4000000' + auditHex,
    'trailing bytes': validHex + '00',
    truncated: validHex.slice(0, -2),
    'too few fields': '940092c2a17502cb41d954ffc4000000',
    'a map': '81a161a162',
    'an extension type': 'd40000',
    'pair of three': '950093c2a175c302cb41d954ffc4000000' + auditHex,
    'pair flag not a bool': '95009201a17502cb41d954ffc4000000' + auditHex,
    'UUID of 15 bytes': '950092c3c40f' + '00'.repeat(15) + '02cb41d954ffc4000000' + auditHex,
    'negative methods': '950092c2a175ffcb41d954ffc4000000' + auditHex,
    'float methods': '950092c2a175cb3ff8000000000000cb41d954ffc4000000' + auditHex,
    'expires_at a string': '950092c2a17502a131' + auditHex,
    'expires_at NaN': '950092c2a17502cb7ff8000000000000' + auditHex,
    'expires_at past year 9999': '950092c2a17502cb7fefffffffffffff' + auditHex,
    'no audit ids': '950092c2a17502cb41d954ffc400000090',
    'three audit ids': '950092c2a17502cb41d954ffc400000093c410' + '00'.repeat(16) + 'c410' + '00'.repeat(16) + 'c410' + '00'.repeat(16),
    'audit id of 15 bytes': '950092c2a17502cb41d954ffc400000091c40f' + '00'.repeat(15),
    'user id not UTF-8': '950092c2a2ff7502cb41d954ffc4000000' + auditHex,
    'system scope other than all': '960892c2a17502a3616c6ccb41d954ffc4000000'.replace('a3616c6c', 'a3616c78') + auditHex,
    'domain neither UUID nor default': '960192c2a17502a56f74686572cb41d954ffc4000000' + auditHex,
    'trust id not 16 bytes': '970392c2a1750292c2a170cb41d954ffc4000000' + auditHex + 'a174',
    'deeply nested': '91'.repeat(20) + '00',
    'array count larger than the input': 'dd7fffffff00',
  };
  for (const [name, hex] of Object.entries(cases)) {
    t.throws(() => codec.decode(Buffer.from(hex, 'hex')), InvalidTokenPayloadError, name);
  }
});

t.test('encoding refuses payloads Keystone could not have made', async (t) => {
  const base = { userId: 'u', methods: [], expiresAt: 1, auditIds: [VECTOR_AUDIT_ID] };
  t.throws(() => codec.encode({ ...base, scope: { type: 'domain', domainId: 'other-domain' } }), RangeError);
  t.throws(() => codec.encode({ ...base, scope: { type: 'trust', projectId: 'p', trustId: 'not-a-uuid' } }), RangeError);
  t.throws(() => codec.encode({ ...base, auditIds: ['short'], scope: { type: 'unscoped' } }), RangeError);
  t.throws(() => codec.encode({ ...base, auditIds: [], scope: { type: 'unscoped' } }), RangeError);
  t.throws(() => codec.encode({ ...base, expiresAt: Number.NaN, scope: { type: 'unscoped' } }), RangeError);
});

t.test('newAuditId gives 22-character ids of 16 random bytes', async (t) => {
  const ids = new Set(Array.from({ length: 50 }, () => newAuditId()));
  t.equal(ids.size, 50);
  for (const id of ids) {
    t.match(id, /^[A-Za-z0-9_-]{22}$/);
    t.equal(Buffer.from(id, 'base64url').length, 16);
  }
});
