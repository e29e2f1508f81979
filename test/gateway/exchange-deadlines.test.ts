import t from 'tap';
import { DeadlineList, ExchangeDeadlines, type DeadlineEntry, type DeadlineTimers } from '../../src/gateway/exchange-deadlines.ts';

// The deadlines of upstream exchanges, counted in ticks of one interval (ticked by hand here).

function entry(name: string, expired: string[]): DeadlineEntry {
  return {
    expire: () => expired.push(name),
    deadlineList: undefined,
    deadlinePrevious: undefined,
    deadlineNext: undefined,
    deadlineArmedAt: 0,
  };
}

/** Timers that never fire by themselves: the test ticks. */
function manualTimers(): DeadlineTimers & { running: number; started: number[] } {
  const timers = {
    running: 0,
    started: [] as number[],
    setInterval: (_callback: () => void, ms: number) => {
      timers.running += 1;
      timers.started.push(ms);
      return { unref: () => undefined };
    },
    clearInterval: () => {
      timers.running -= 1;
    },
  };
  return timers;
}

t.test('a list expires what was armed `ticks` ago, oldest first, and nothing sooner', async (t) => {
  const expired: string[] = [];
  const list = new DeadlineList(3);
  const [a, b, c] = [entry('a', expired), entry('b', expired), entry('c', expired)];
  list.arm(a, 0);
  list.arm(b, 1);
  list.arm(c, 1);
  list.expire(2);
  t.same(expired, [], 'two ticks after: nothing');
  list.expire(3);
  t.same(expired, ['a'], 'three ticks after a: a only');
  t.equal(a.deadlineList, undefined, 'an expired entry is no longer armed');
  list.expire(4);
  t.same(expired, ['a', 'b', 'c']);
  t.ok(list.empty);
});

t.test('re-arming moves an entry to the end; a removed entry never expires', async (t) => {
  const expired: string[] = [];
  const list = new DeadlineList(2);
  const [a, b, c] = [entry('a', expired), entry('b', expired), entry('c', expired)];
  list.arm(a, 0);
  list.arm(b, 0);
  list.arm(c, 0);
  list.arm(a, 1); // a piece of body came: a owes the next one from tick 1
  list.remove(b);
  list.remove(b); // twice: harmless
  list.expire(2);
  t.same(expired, ['c'], 'only c, armed at 0, is due at 2');
  list.expire(3);
  t.same(expired, ['c', 'a']);
  t.ok(list.empty);
});

t.test('an entry moves from one list to another (headers owed, then body)', async (t) => {
  const expired: string[] = [];
  const headers = new DeadlineList(2);
  const body = new DeadlineList(10);
  const a = entry('a', expired);
  headers.arm(a, 0);
  body.arm(a, 1);
  t.ok(headers.empty, 'taken out of the headers list');
  headers.expire(5);
  body.expire(5);
  t.same(expired, [], 'the headers deadline no longer applies');
  body.expire(11);
  t.same(expired, ['a']);
});

t.test('ExchangeDeadlines: a tick of an eighth of the shorter timeout; a deadline passes between timeout and timeout + 2 ticks', async (t) => {
  const timers = manualTimers();
  const deadlines = new ExchangeDeadlines({ responseTimeoutMs: 800, bodyTimeoutMs: 1600 }, timers);
  t.equal(deadlines.tickMs, 100);
  const expired: string[] = [];
  const a = entry('a', expired);
  deadlines.awaitHeaders(a);
  t.same(timers.started, [100], 'the interval starts with the first armed entry');
  // Armed just before a tick: the first tick counts almost nothing, so 8 ticks (800 ms) may not
  // have run whole; the 9th makes sure.
  for (let tick = 0; tick < 8; tick += 1) deadlines.tick();
  t.same(expired, [], 'not after 8 ticks');
  deadlines.tick();
  t.same(expired, ['a'], 'after 9');
  t.equal(timers.running, 0, 'nothing armed: the interval stopped');

  deadlines.awaitBody(a);
  t.equal(timers.running, 1, 'and starts again');
  for (let tick = 0; tick < 10; tick += 1) {
    deadlines.tick();
    deadlines.awaitBody(a); // a piece of body every tick: never due
  }
  deadlines.release(a);
  deadlines.tick();
  t.same(expired, ['a'], 'released: never expired');
  t.equal(timers.running, 0);
  deadlines.close();
});

t.test('ExchangeDeadlines: ticks between 5 ms and 1 s', async (t) => {
  t.equal(new ExchangeDeadlines({ responseTimeoutMs: 60_000, bodyTimeoutMs: 60_000 }, manualTimers()).tickMs, 1000);
  t.equal(new ExchangeDeadlines({ responseTimeoutMs: 10, bodyTimeoutMs: 60_000 }, manualTimers()).tickMs, 5);
});
