import { pbkdf2Sync, scryptSync } from 'node:crypto';
import t from 'tap';
import { PasswordHasher } from '../../src/identity/password-hash.ts';

const hasher = new PasswordHasher({ bcryptRounds: 4 });

/** passlib "adapted base64", written independently of the module under test. */
function adaptedBase64(bytes: Buffer): string {
  return bytes.toString('base64').replace(/=+$/, '').replaceAll('+', '.');
}

function unpaddedBase64(bytes: Buffer): string {
  return bytes.toString('base64').replace(/=+$/, '');
}

t.test('constructor rejects bcrypt costs outside 4..31', async (t) => {
  for (const bcryptRounds of [3, 32, 4.5, Number.NaN]) {
    t.throws(() => new PasswordHasher({ bcryptRounds }), RangeError, `cost ${bcryptRounds}`);
  }
  t.doesNotThrow(() => new PasswordHasher({ bcryptRounds: 31 }));
});

t.test('hash produces $2b$ with the configured cost and a fresh salt', async (t) => {
  const first = await hasher.hash('correct horse');
  const second = await hasher.hash('correct horse');
  t.match(first, /^\$2b\$04\$[./A-Za-z0-9]{53}$/);
  t.not(first, second, 'each hash gets its own salt');
  t.equal(await hasher.verify('correct horse', first), true);
  t.equal(await hasher.verify('correct horse', second), true);
  t.equal(await hasher.verify('correct horsf', first), false);
  t.equal(await hasher.verify('', first), false);
  t.equal(await hasher.verify('Correct horse', first), false);
});

t.test('empty password round-trips like any other', async (t) => {
  const stored = await hasher.hash('');
  t.equal(await hasher.verify('', stored), true);
  t.equal(await hasher.verify(' ', stored), false);
});

t.test('bcrypt uses only the first 72 UTF-8 bytes', async (t) => {
  const prefix = 'p'.repeat(72);
  const stored = await hasher.hash(`${prefix}first-tail`);
  t.equal(await hasher.verify(`${prefix}other-tail`, stored), true, 'bytes after 72 are ignored');
  t.equal(await hasher.verify(prefix, stored), true);
  t.equal(await hasher.verify(prefix.slice(1), stored), false, 'the 72nd byte still counts');

  // 'é' is two UTF-8 bytes: 36 of them fill the limit although the string has only 36 characters.
  const accented = await hasher.hash('é'.repeat(40));
  t.equal(await hasher.verify(`${'é'.repeat(36)}zzzz`, accented), true, 'limit counted in bytes');
  t.equal(await hasher.verify('é'.repeat(35), accented), false);

  // A 73-byte password loses the second byte of its last character; Keystone truncates bytes, not
  // characters, so any character sharing the first byte (0xC3) is equivalent there.
  const splitCharacter = await hasher.hash(`a${'é'.repeat(36)}`);
  t.equal(await hasher.verify(`a${'é'.repeat(35)}ü`, splitCharacter), true, 'truncated mid-character');
  t.equal(await hasher.verify(`a${'é'.repeat(35)}`, splitCharacter), false);
});

t.test('bcrypt known-answer vectors and prefix variants', async (t) => {
  // crypt_blowfish (Openwall) test vectors.
  const uStarU = 'CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW';
  for (const variant of ['2a', '2b', '2y']) {
    t.equal(await hasher.verify('U*U', `$${variant}$05$${uStarU}`), true, `$${variant}$`);
    t.equal(await hasher.verify('U*V', `$${variant}$05$${uStarU}`), false, `$${variant}$ wrong password`);
  }
  t.equal(await hasher.verify('U*U*', '$2a$05$CCCCCCCCCCCCCCCCCCCCC.VGOzA784oUp/Z0DY336zx7pLYAy0lwK'), true);
  t.equal(await hasher.verify('', '$2a$05$CCCCCCCCCCCCCCCCCCCCC.7uG0VCzI2bS7j6ymqJi9CdcdxiRTWNy'), true);

  // `$2x$` agrees with the standard algorithm for ASCII passwords only.
  t.equal(await hasher.verify('U*U', `$2x$05$${uStarU}`), true, '$2x$ with an ASCII password');
  const accented = await hasher.hash('é');
  t.equal(await hasher.verify('é', accented), true);
  t.equal(await hasher.verify('é', accented.replace('$2b$', '$2x$')), false, '$2x$ with non-ASCII is refused');

  // `$2$` vectors that passlib itself uses to probe its backends.
  t.equal(await hasher.verify('test', '$2$04$5BJqKfqMQvV7nS.yUguNcuRfMMOXK0xPWavM7pOzjEi5ze5T1k8/S'), true, '$2$');
  t.equal(await hasher.verify('test', '$2$04$......................1O4gOrCYaqBG3o/4LnT2ykQUt1wbyju'), true, '$2$');
  t.equal(await hasher.verify('tesx', '$2$04$......................1O4gOrCYaqBG3o/4LnT2ykQUt1wbyju'), false);
  t.equal(await hasher.verify('test', '$2a$04$......................1O4gOrCYaqBG3o/4LnT2ykQUt1wbyju'), false,
    '$2$ and $2a$ differ for short passwords');
});

t.test('passlib scrypt', async (t) => {
  // Example from the passlib 1.7 documentation (default parameters ln=16, r=8, p=1).
  const documented = '$scrypt$ln=16,r=8,p=1$aM15713r3Xsvxbi31lqr1Q$nFNh2CVHVjNldFVKDHDlm4CbdRSCdEBsjjJxD+iCs5E';
  t.equal(await hasher.verify('password', documented), true, 'passlib documentation vector');
  t.equal(await hasher.verify('passwore', documented), false);

  const salt = Buffer.from('fb ef be 00 01 02 03 04 05 06 07 08 09 0a 0b 0c'.replaceAll(' ', ''), 'hex');
  const derived = scryptSync('pässword', salt, 32, { N: 2 ** 4, r: 8, p: 2 });
  const built = `$scrypt$ln=4,r=8,p=2$${unpaddedBase64(salt)}$${unpaddedBase64(derived)}`;
  t.equal(await hasher.verify('pässword', built), true, 'independently derived hash');
  t.equal(await hasher.verify('password', built), false);

  t.equal(await hasher.verify('pässword', `${built}=`), false, 'padding is not passlib format');
  t.equal(await hasher.verify('pässword', built.replace('ln=4,r=8,p=2', 'r=8,ln=4,p=2')), false, 'parameter order');
  const shortChecksum = `$scrypt$ln=4,r=8,p=2$${unpaddedBase64(salt)}$${unpaddedBase64(derived.subarray(0, 16))}`;
  t.equal(await hasher.verify('pässword', shortChecksum), false, 'checksum must be 32 bytes');
  t.equal(await hasher.verify('pässword', built.replace('ln=4', 'ln=40')), false, 'absurd cost refused');
  t.equal(await hasher.verify('pässword', built.replace('ln=4', 'ln=0')), false);
});

t.test('$7$ scrypt crypt format', async (t) => {
  // Colin Percival's unix-scrypt vectors (also in libsodium and yescrypt).
  const cheap = '$7$06..../....SodiumChloride$ENlyo6fGw4PCcDBOFepfSZjFUnVatHzCcW55.ZGz3B0';
  const standard = '$7$C6..../....SodiumChloride$kBGj9fHznVYFQMEn/qDCfrDevf9YDtcDdKvEqHJLV8D';
  t.equal(await hasher.verify('pleaseletmein', cheap), true);
  t.equal(await hasher.verify('pleaseletmein', standard), true);
  t.equal(await hasher.verify('pleaseletmeout', cheap), false);
  t.equal(await hasher.verify('pleaseletmein', cheap.slice(0, -1)), false);
});

t.test('passlib pbkdf2-sha512', async (t) => {
  // Known-answer vectors from passlib's own test suite.
  t.equal(
    await hasher.verify(
      'password',
      '$pbkdf2-sha512$1212$RHY0Fr3IDMSVO/RSZyb5ow$eNLfBK.eVozomMr.1gYa17k9B7KIK25NOEshvhrSX.esqY3s.FvWZViXz4KoLlQI.BzY/YTNJOiKc5gBYFYGww',
    ),
    true,
  );
  const greekName = '$pbkdf2-sha512$1212$KkbvoKGsAIcF8IslDR6skQ$8be/PRmd88Ps8fmPowCJttH9G3vgxpG.Krjt3KT.NP6cKJ0V4Prarqf.HBwz0dCkJ6xgWnSj2ynXSV7MlvMa8Q';
  t.equal(await hasher.verify('\u0399\u03c9\u03b1\u03bd\u03bd\u03b7\u03c2', greekName), true, 'non-ASCII password');
  t.equal(await hasher.verify('Ιωαννη', greekName), false);

  // Salt bytes chosen so standard base64 contains '+', which passlib spells '.'.
  const salt = Buffer.from('fbefbefbefbe0102030405060708090a', 'hex');
  const derived = pbkdf2Sync('s3cret', salt, 25000, 64, 'sha512');
  const built = `$pbkdf2-sha512$25000$${adaptedBase64(salt)}$${adaptedBase64(derived)}`;
  t.match(built, /\$\.\.\.\./, 'the salt exercises the adapted alphabet');
  t.equal(await hasher.verify('s3cret', built), true, 'independently derived hash');
  t.equal(await hasher.verify('s3cres', built), false);
  t.equal(await hasher.verify('s3cret', built.replace('$25000$', '$025000$')), false, 'zero-padded rounds');
  t.equal(await hasher.verify('s3cret', built.replace('$25000$', '$0$')), false, 'zero rounds');
  t.equal(await hasher.verify('s3cret', built.slice(0, -2)), false, 'checksum must be 64 bytes');
});

t.test('non-bcrypt formats use max_password_length (4096 UTF-8 bytes), not 72', async (t) => {
  const salt = Buffer.from('00112233445566778899aabbccddeeff', 'hex');
  const pbkdf2Of = (secret: string): string =>
    `$pbkdf2-sha512$10$${adaptedBase64(salt)}$${adaptedBase64(pbkdf2Sync(secret, salt, 10, 64, 'sha512'))}`;
  const limit = 'k'.repeat(4096);
  t.equal(await hasher.verify(`${limit}ignored`, pbkdf2Of(limit)), true, 'bytes after 4096 are ignored');
  t.equal(await hasher.verify('k'.repeat(73), pbkdf2Of('k'.repeat(73))), true, '73 bytes all count');
  t.equal(await hasher.verify('k'.repeat(73), pbkdf2Of('k'.repeat(72))), false);

  const shortLimit = new PasswordHasher({ bcryptRounds: 4, maxPasswordLength: 8 });
  t.equal(await shortLimit.verify('12345678-and-more', pbkdf2Of('12345678')), true, 'configurable limit');
});

t.test('sha512-crypt ($6$)', async (t) => {
  // Ulrich Drepper's specification vectors (cross-checked with `openssl passwd -6`).
  const vectors: Array<[string, string]> = [
    ['Hello world!', '$6$saltstring$svn8UoSVapNtMuq1ukKS4tPQd8iKwSMHWjl/O817G3uBnIFNjnQJuesI68u4OTLiBFdcbYEdFCoEOfaS35inz1'],
    [
      'Hello world!',
      '$6$rounds=10000$saltstringsaltst$OW1/O6BYHV6BcXZu8QVeXbDWra3Oeqh0sbHbbMCVNSnCM/UrjmM0Dp8vOuZeHBy/YTBmSK6H9qs/y3RnOaw5v.',
    ],
    [
      'This is just a test',
      '$6$rounds=5000$toolongsaltstrin$lQ8jolhgVRVhY4b5pZKaysCLi0QBxGoNeKQzQ3glMhwllF7oGDZxUhx1yxdYcz/e1JSbq3y6JMxxl8audkUEm0',
    ],
    [
      'a very much longer text to encrypt.  This one even stretches over morethan one line.',
      '$6$rounds=1400$anotherlongsalts$POfYwTEok97VWcjxIiSOjiykti.o/pQs.wPvMxQ6Fm7I6IoYN3CmLs66x9t0oSwbtEW7o7UmJEiDwGqd8p4ur1',
    ],
    [
      'we have a short salt string but not a short password',
      '$6$rounds=77777$short$WuQyW2YR.hBNpjjRhpYD/ifIw05xdfeEyQoMxIXbkvr0gge1a1x3yRULJ5CCaUeOxFmtlcGZelFl5CxtgfiAc0',
    ],
    [
      'the minimum number is still observed',
      '$6$rounds=1000$roundstoolow$kUMsbe306n21p9R.FRkW3IGn.S9NPN0x50YhH1xhLsPuWGsUSklZt58jaTfF4ZEQpyUNGc0dqbpBYYBaHHrsX.',
    ],
    // From `openssl passwd -6 -salt Jjz9X3kQ 'pässwörd'` in a UTF-8 shell.
    ['pässwörd', '$6$Jjz9X3kQ$SSSP9uxjyq5bzcQq.q4Kl4gLr3IF9bPwgOGn9rUeeNkZ2VyEmQLvQXDZbWv1ED8NtqGxYS063lbFZf7laboDG/'],
  ];
  for (const [password, stored] of vectors) {
    t.equal(await hasher.verify(password, stored), true, stored.slice(0, 30));
    t.equal(await hasher.verify(`${password}x`, stored), false, `${stored.slice(0, 30)} wrong password`);
  }
  const helloWorld = vectors[0]![1];
  t.equal(await hasher.verify('Hello world!', helloWorld.replace('$6$', '$6$rounds=5000$')), true,
    'explicit default rounds');
  t.equal(await hasher.verify('Hello world!', helloWorld.replace('$6$', '$6$rounds=10$')), false,
    'rounds below the minimum are refused as passlib does');
  t.equal(await hasher.verify('Hello world!\0', helloWorld), false, 'NUL in the password');
  t.equal(await hasher.verify('Hello world!', helloWorld.replace('saltstring', 'saltstringsaltstring')), false,
    'over-long salt');
});

t.test('high-round sha512-crypt does not monopolise the event loop', async (t) => {
  let turns = 0;
  let counting = true;
  const tick = (): void => {
    turns += 1;
    if (counting) setImmediate(tick);
  };
  setImmediate(tick);
  const verified = await hasher.verify(
    'we have a short salt string but not a short password',
    '$6$rounds=77777$short$WuQyW2YR.hBNpjjRhpYD/ifIw05xdfeEyQoMxIXbkvr0gge1a1x3yRULJ5CCaUeOxFmtlcGZelFl5CxtgfiAc0',
  );
  counting = false;
  t.equal(verified, true);
  t.ok(turns > 10, `other work ran ${turns} times meanwhile`);
});

t.test('missing, malformed and unknown stored hashes verify as false', async (t) => {
  t.equal(await hasher.verify('anything', null), false);
  t.equal(await hasher.verify('anything', undefined), false);
  t.equal(await hasher.verify('anything', ''), false);
  const garbage = [
    'garbage',
    'anything',
    '$',
    '$2b$',
    '$2b$04$short',
    '$2b$99$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW',
    '$2c$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW',
    '$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOe!',
    '$scrypt$',
    '$scrypt$ln=16,r=8,p=1$$',
    '$scrypt$ln=16,r=8,p=1$a$b',
    '$scrypt$ln=1,r=0,p=1$aM15713r3Xsvxbi31lqr1Q$nFNh2CVHVjNldFVKDHDlm4CbdRSCdEBsjjJxD+iCs5E',
    '$7$',
    '$7$C6..../....SodiumChloride$',
    '$pbkdf2-sha512$',
    '$pbkdf2-sha512$abc$RHY0Fr3IDMSVO/RSZyb5ow$eNLfBK',
    '$pbkdf2-sha512$99999999999$RHY0Fr3IDMSVO/RSZyb5ow$x',
    '$6$',
    '$6$salt$tooshort',
    '$5$saltstring$5B8vYYiY.CVt1RlTTf8KbXBH3hsxY/GNooZF4b7ehyk8',
    '$1$saltsalt$qjXMvbEw8oaL.CzflDugX/',
    '$argon2id$v=19$m=65536,t=3,p=4$c29tZXNhbHQ$RdescudvJCsgt3ub+b+dWRWJTmaaJObG',
    'plaintext-password',
  ];
  for (const stored of garbage) {
    t.equal(await hasher.verify('anything', stored), false, JSON.stringify(stored));
  }
  t.equal(await hasher.verify('plaintext-password', 'plaintext-password'), false, 'never a plaintext compare');
});

t.test('verifyDummy resolves and costs about as much as a real verification', async (t) => {
  t.equal(await hasher.verifyDummy('whatever'), undefined);
  t.equal(await hasher.verifyDummy(''), undefined);
  t.equal(await hasher.verifyDummy('x'.repeat(5000)), undefined);

  // Cost 8 is slow enough (~15 ms) for the comparison to dominate scheduling noise.
  const costly = new PasswordHasher({ bcryptRounds: 8 });
  const stored = await costly.hash('real password');
  const elapsed = async (work: () => Promise<unknown>): Promise<number> => {
    const started = process.hrtime.bigint();
    await work();
    return Number(process.hrtime.bigint() - started);
  };
  // Interleaved, and the medians compared: a stall of a loaded machine lands in one run of one kind,
  // not in all of them.
  const runs = { real: [] as number[], dummy: [] as number[], missingHash: [] as number[] };
  for (let round = 0; round < 7; round += 1) {
    runs.real.push(await elapsed(() => costly.verify('wrong password', stored)));
    runs.dummy.push(await elapsed(() => costly.verifyDummy('wrong password')));
    runs.missingHash.push(await elapsed(() => costly.verify('wrong password', null)));
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
  const real = median(runs.real);
  const dummy = median(runs.dummy);
  const missingHash = median(runs.missingHash);
  t.ok(dummy > real / 3 && dummy < real * 3, `dummy ${dummy} ns vs real ${real} ns`);
  t.ok(missingHash > real / 3, `missing hash ${missingHash} ns vs real ${real} ns`);
});
