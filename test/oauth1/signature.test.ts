import { randomBytes } from 'node:crypto';
import t from 'tap';
import { SecretBox } from '../../src/oauth1/secret-box.ts';
import {
  baseStringUri,
  hmacSignature,
  parseAuthorizationHeader,
  percentEncode,
  queryParameters,
  signatureBaseString,
  verifyHmacSignature,
  verifyOAuthSignature,
} from '../../src/oauth1/signature.ts';
import { oauthlibAuthorization, oauthlibAvailable } from '../helpers/oauth1-signer.ts';

t.test('RFC 5849 §3.4.1.1: the signature base string of the published example', async (t) => {
  const header =
    'OAuth realm="Example", oauth_consumer_key="9djdj82h48djs9d2", oauth_token="kkk9d7dh3k39sjv7", oauth_signature_method="HMAC-SHA1", ' +
    'oauth_timestamp="137131201", oauth_nonce="7d8f3e4a", oauth_signature="bYT5CMsGcbgUdFHObYMEfcx6bsw%3D"';
  const oauth = parseAuthorizationHeader(header)!;
  t.equal(oauth.get('realm'), 'Example');
  t.equal(oauth.get('oauth_signature'), 'bYT5CMsGcbgUdFHObYMEfcx6bsw=', 'values are percent-decoded');
  const url = 'http://example.com/request?b5=%3D%253D&a3=a&c%40=&a2=r%20b';
  const body = new URLSearchParams('c2&a3=2+q');
  const base = signatureBaseString('POST', url, [...queryParameters(url), ...oauth, ...body]);
  t.equal(
    base,
    'POST&http%3A%2F%2Fexample.com%2Frequest&a2%3Dr%2520b%26a3%3D2%2520q%26a3%3Da%26b5%3D%253D%25253D%26c%2540%3D%26c2%3D%26oauth_consumer_key%3D9djdj82h48djs9d2%26oauth_nonce%3D7d8f3e4a%26oauth_signature_method%3DHMAC-SHA1%26oauth_timestamp%3D137131201%26oauth_token%3Dkkk9d7dh3k39sjv7',
  );
});

t.test('RFC 5849 §1.2: the photos example signs to the published signature', async (t) => {
  const url = 'http://photos.example.net/photos?file=vacation.jpg&size=original';
  const oauth = parseAuthorizationHeader(
    'OAuth realm="Photos", oauth_consumer_key="dpf43f3p2l4k3l03", oauth_token="nnch734d00sl2jdk", oauth_signature_method="HMAC-SHA1", oauth_timestamp="137131202", oauth_nonce="chapoH", oauth_signature="MdpQcU8iPSUjWoN%2FUDMsK2sui9I%3D"',
  )!;
  const base = signatureBaseString('GET', url, [...queryParameters(url), ...oauth]);
  t.equal(hmacSignature('HMAC-SHA1', base, 'kd94hf93k423kf44', 'pfkkdhi9sl3r4s00'), 'MdpQcU8iPSUjWoN/UDMsK2sui9I=');
  t.ok(verifyHmacSignature('HMAC-SHA1', base, 'MdpQcU8iPSUjWoN/UDMsK2sui9I=', 'kd94hf93k423kf44', 'pfkkdhi9sl3r4s00'));
  t.notOk(verifyHmacSignature('HMAC-SHA1', base, 'MdpQcU8iPSUjWoN/UDMsK2sui9I=', 'kd94hf93k423kf44', 'wrong'), 'another token secret');
  t.notOk(verifyHmacSignature('HMAC-SHA1', base.replace('vacation', 'vacatioN'), 'MdpQcU8iPSUjWoN/UDMsK2sui9I=', 'kd94hf93k423kf44', 'pfkkdhi9sl3r4s00'), 'another request');
});

t.test('percent-encoding (§3.6) and the base string URI (§3.4.1.2)', async (t) => {
  t.equal(percentEncode("AZaz09-._~ !*'()/+=&%é"), 'AZaz09-._~%20%21%2A%27%28%29%2F%2B%3D%26%25%C3%A9');
  t.equal(baseStringUri('HTTP://EXAMPLE.COM:80/r%20v/X?id=123'), 'http://example.com/r%20v/X');
  t.equal(baseStringUri('https://www.example.net:8080/?q=1'), 'https://www.example.net:8080/');
  t.equal(baseStringUri('https://example.net:443/a'), 'https://example.net/a');
  t.equal(parseAuthorizationHeader('Basic abc'), undefined);
  t.equal(parseAuthorizationHeader('OAuth a="1", a="2"'), undefined, 'a parameter given twice');
  t.equal(parseAuthorizationHeader(undefined), undefined);
});

t.test('oauthlib (an independent signer) and this verifier agree', async (t) => {
  t.ok(oauthlibAvailable(), 'python3-oauthlib is installed (apt-get install python3-oauthlib)');
  const cases = [
    { url: 'http://keystone.test:5000/v3/OS-OAUTH1/request_token', callback: 'oob', method: 'HMAC-SHA1' as const },
    { url: 'https://id.example.org/v3/auth/tokens?x=a%20b&y=%E2%9C%93&x=0', method: 'HMAC-SHA1' as const, token: 'a'.repeat(32), tokenSecret: 'b&c=d é' },
    { url: 'http://127.0.0.1:8080/identity/v3/OS-OAUTH1/access_token', method: 'HMAC-SHA256' as const, token: 'c'.repeat(32), tokenSecret: 'secret', verifier: 'ABCDEFGH' },
  ];
  for (const signing of cases) {
    const consumerSecret = randomBytes(16).toString('hex') + " !*'()";
    const header = oauthlibAuthorization({ consumerKey: 'd'.repeat(32), consumerSecret, timestamp: '1700000000', nonce: randomBytes(8).toString('hex'), ...signing });
    const oauth = parseAuthorizationHeader(header)!;
    t.equal(oauth.get('oauth_signature_method'), signing.method);
    const base = signatureBaseString('POST', signing.url, [...queryParameters(signing.url), ...oauth]);
    t.ok(verifyHmacSignature(signing.method, base, oauth.get('oauth_signature')!, consumerSecret, signing.tokenSecret ?? ''), `${signing.method} ${signing.url}`);
    t.equal(hmacSignature(signing.method, base, consumerSecret, signing.tokenSecret ?? ''), oauth.get('oauth_signature'), 'the same signature');
    t.notOk(verifyHmacSignature(signing.method, base, oauth.get('oauth_signature')!, `${consumerSecret}x`, signing.tokenSecret ?? ''));
  }
});

t.test('PLAINTEXT (RFC 5849 §3.4.4) as oauthlib signs it: both secrets, encoded; RSA never verifies (no key is known)', async (t) => {
  const consumerSecret = `${randomBytes(16).toString('hex')} &!*'()`;
  const tokenSecret = `${randomBytes(16).toString('hex')}/+=`;
  const cases = [
    { name: 'a request token (no token secret)', tokenSecret: undefined },
    { name: 'an access token', tokenSecret },
  ];
  for (const { name, tokenSecret } of cases) {
    const header = oauthlibAuthorization({ url: 'http://127.0.0.1/v3/OS-OAUTH1/request_token', consumerKey: 'd'.repeat(32), consumerSecret, tokenSecret, token: tokenSecret && 'c'.repeat(32), method: 'PLAINTEXT' });
    const oauth = parseAuthorizationHeader(header)!;
    t.equal(oauth.get('oauth_signature_method'), 'PLAINTEXT');
    const signature = oauth.get('oauth_signature')!;
    const noBaseString = () => t.fail('PLAINTEXT signs no base string') as never;
    t.ok(verifyOAuthSignature('PLAINTEXT', noBaseString, signature, consumerSecret, tokenSecret ?? ''), name);
    t.notOk(verifyOAuthSignature('PLAINTEXT', noBaseString, signature, `${consumerSecret}x`, tokenSecret ?? ''), `${name}: another consumer secret`);
    t.notOk(verifyOAuthSignature('PLAINTEXT', noBaseString, signature, consumerSecret, `${tokenSecret ?? ''}x`), `${name}: another token secret`);
  }
  for (const method of ['RSA-SHA1', 'RSA-SHA256', 'RSA-SHA512'] as const) {
    t.notOk(verifyOAuthSignature(method, () => 'POST&x&y', 'anything', consumerSecret), `${method}: refused`);
  }
});

t.test('secrets at rest: sealed per row, opened only with the same pepper and row', async (t) => {
  const pepper = randomBytes(32);
  const box = new SecretBox(pepper);
  const sealed = box.seal('0123456789abcdef0123456789abcdef', 'consumer:c1');
  t.match(sealed, /^aes256gcm:/);
  t.notOk(sealed.includes('0123456789abcdef'));
  t.not(box.seal('0123456789abcdef0123456789abcdef', 'consumer:c1'), sealed, 'a fresh IV each time');
  t.equal(box.open(sealed, 'consumer:c1'), '0123456789abcdef0123456789abcdef');
  t.equal(box.open(sealed, 'consumer:c2'), undefined, 'bound to its row');
  t.equal(new SecretBox(randomBytes(32)).open(sealed, 'consumer:c1'), undefined, 'another pepper');
  const tampered = sealed.slice(0, -2) + (sealed.endsWith('A') ? 'BB' : 'AA');
  t.equal(box.open(tampered, 'consumer:c1'), undefined, 'tampering is detected');
  t.equal(box.open('plain', 'consumer:c1'), undefined);
  t.throws(() => new SecretBox(Buffer.alloc(8)));
});
