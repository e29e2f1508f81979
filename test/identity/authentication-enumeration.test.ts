import t from 'tap';
import { PasswordHasher } from '../../src/identity/password-hash.ts';
import { startTestApp } from '../helpers/app.ts';

// An unknown user, a wrong password, a disabled user and a locked user must look the same to a
// client: status, headers, body, and time (each costs one bcrypt verification). Timing is compared
// statistically with generous bounds: medians of interleaved samples, bcrypt at cost 8 so hashing
// dominates everything else a request does.

const ROUNDS = 8;
const SAMPLES = 20;
const WARM_UP = 3;

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

function quantile(values: number[], fraction: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))]!;
}

function quartiles(values: number[]): string {
  return `p25 ${quantile(values, 0.25).toFixed(1)} ms, median ${median(values).toFixed(1)} ms, p75 ${quantile(values, 0.75).toFixed(1)} ms`;
}

t.test('unknown user, wrong password, disabled user and locked user are indistinguishable', async (t) => {
  const app = await startTestApp(t, {
    PASSWORD_HASH_ROUNDS: String(ROUNDS),
    IDENTITY_LOCKOUT_FAILURE_ATTEMPTS: '3',
    // The rate limits would answer 429 long before the samples are taken.
    AUTH_RATE_LIMIT_PER_USER: '0',
    AUTH_RATE_LIMIT_PER_ADDRESS: '0',
  });
  // The wrong-password user must not lock while it is sampled; its failures are still recorded.
  await app.call('POST', '/v3/users', { user: { name: 'wrong-password', password: 'Right-1', options: { ignore_lockout_failure_attempts: true } } });
  await app.call('POST', '/v3/users', { user: { name: 'disabled', password: 'Right-1', enabled: false } });
  await app.call('POST', '/v3/users', { user: { name: 'locked', password: 'Right-1' } });
  for (let i = 0; i < 3; i++) await app.login({ name: 'locked', domain: { id: 'default' } }, 'wrong');

  // Each kind with the password an attacker would most like to confirm.
  const kinds = {
    'unknown user': { name: 'no-such-user', password: 'Right-1' },
    'wrong password': { name: 'wrong-password', password: 'Wrong-1' },
    'disabled user': { name: 'disabled', password: 'Right-1' },
    'locked user': { name: 'locked', password: 'Right-1' },
  } as const;
  type Kind = keyof typeof kinds;
  const names = Object.keys(kinds) as Kind[];
  const attempt = async (kind: Kind) => {
    const { name, password } = kinds[kind];
    const started = performance.now();
    const response = await app.request({
      method: 'POST',
      url: '/v3/auth/tokens',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ auth: { identity: { methods: ['password'], password: { user: { name, domain: { id: 'default' }, password } } } } }),
    });
    return { response, milliseconds: performance.now() - started };
  };

  // One bare bcrypt verification, timed in the same rotation as the requests so load drift hits it too.
  const hasher = new PasswordHasher({ bcryptRounds: ROUNDS });
  const bcryptTimes: number[] = [];
  const probe = async () => {
    const started = performance.now();
    await hasher.verifyDummy('probe');
    return performance.now() - started;
  };
  const times = Object.fromEntries(names.map((kind) => [kind, [] as number[]])) as Record<Kind, number[]>;
  const answers: Record<Kind, { status: number; body: string; headers: string[] }[]> = Object.fromEntries(names.map((kind) => [kind, []])) as never;
  for (let round = 0; round < WARM_UP + SAMPLES; round++) {
    // Interleaved, in a different order each round, so drift in machine load hits every kind alike.
    const order = names.map((kind, index) => ({ kind, sort: (index + round) % names.length }))
      .sort((a, b) => a.sort - b.sort)
      .map(({ kind }) => kind);
    if (round % 2) order.reverse();
    const probeAt = round % (order.length + 1);
    for (const [position, kind] of order.entries()) {
      if (position === probeAt && round >= WARM_UP) bcryptTimes.push(await probe());
      const { response, milliseconds } = await attempt(kind);
      if (round < WARM_UP) continue;
      times[kind].push(milliseconds);
      answers[kind].push({
        status: response.statusCode,
        body: response.body,
        headers: Object.keys(response.headers).filter((name) => name !== 'x-openstack-request-id' && name !== 'date').sort(),
      });
    }
    if (probeAt === order.length && round >= WARM_UP) bcryptTimes.push(await probe());
  }

  const reference = answers['unknown user'][0]!;
  t.equal(reference.status, 401);
  t.same(JSON.parse(reference.body), { error: { code: 401, title: 'Unauthorized', message: 'The request you have made requires authentication.' } });
  t.notOk(reference.headers.includes('x-subject-token'));
  for (const kind of names) {
    t.ok(answers[kind].every((answer) => answer.status === reference.status), `${kind}: same status every time`);
    t.ok(answers[kind].every((answer) => answer.body === reference.body), `${kind}: byte-identical body every time`);
    t.ok(answers[kind].every((answer) => answer.headers.join() === reference.headers.join()), `${kind}: same headers`);
  }

  // What one bcrypt verification cost while the samples were taken: every kind must pay about that much.
  const bcrypt = median(bcryptTimes);
  t.comment(`one bcrypt verification at cost ${ROUNDS}: ${bcrypt.toFixed(1)} ms`);
  const medians = names.map((kind) => median(times[kind]));
  for (const [index, kind] of names.entries()) {
    t.comment(`${kind}: ${quartiles(times[kind])}`);
    t.ok(medians[index]! >= 0.6 * bcrypt, `${kind} pays for a hash verification (median ${medians[index]!.toFixed(1)} ms)`);
  }
  // Load on a shared machine only ever adds time, so the lower quartile is what a kind costs at least;
  // a kind that skipped the hash would be ~10× below the others (a few ms against ~50 at cost 8),
  // while the medians of an honest run on a loaded 2-core machine were seen 1.51× apart.
  const lowerQuartiles = names.map((kind) => quantile(times[kind], 0.25));
  const ratio = Math.max(...lowerQuartiles) / Math.min(...lowerQuartiles);
  t.ok(ratio < 2, `lower quartiles within a factor of 2 of each other (${ratio.toFixed(2)})`);
});
