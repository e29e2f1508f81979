import t from 'tap';
import { runStages, then, type Stage, type Step } from '../../src/gateway/pipeline.ts';

// The gateway's one sync-or-async rule: an answer at hand continues in the same turn (no promise),
// a promise continues when it settles; stages run in order until one ends the request.

t.test('then(): a value at hand continues at once, without a promise', (t) => {
  const seen: string[] = [];
  const result = then(2, 'state', (state, value: number) => {
    seen.push(`${state}:${value}`);
    return value * 10;
  });
  t.same(seen, ['state:2'], 'next ran before then() returned');
  t.equal(result, 20);
  t.notOk((result as unknown) instanceof Promise, 'no promise on the synchronous path');
  t.end();
});

t.test('then(): a promise continues once it settles', async (t) => {
  const seen: string[] = [];
  const result = then(Promise.resolve(3), 'state', (state, value: number) => {
    seen.push(`${state}:${value}`);
    return value * 10;
  });
  t.ok(result instanceof Promise, 'a promise when the step had to wait');
  t.same(seen, [], 'next waits for the value');
  t.equal(await result, 30);
  t.same(seen, ['state:3']);
});

t.test('then(): failures come out the way the step went', async (t) => {
  t.throws(
    () =>
      then(1, undefined, () => {
        throw new Error('sync');
      }),
    /sync/,
    'thrown at once on the synchronous path',
  );
  await t.rejects(
    then(Promise.resolve(1), undefined, () => {
      throw new Error('async');
    }) as Promise<never>,
    /async/,
    'a rejection on the asynchronous path',
  );
  let called = false;
  await t.rejects(
    then(Promise.reject(new Error('step')), undefined, () => {
      called = true;
    }) as Promise<void>,
    /step/,
  );
  t.notOk(called, 'next is not called for a failed step');
});

/** A stage that records its name and answers `answer` (a promise when `wait`). */
function stage(log: string[], name: string, answer: string | undefined, wait = false): Stage<string[], string> {
  return (subject) => {
    subject.push(name);
    log.push(name);
    return wait ? Promise.resolve(answer) : answer;
  };
}

t.test('runStages(): all at hand: every stage in order, in one turn', (t) => {
  const log: string[] = [];
  const subject: string[] = [];
  const ending: Step<string | undefined> = runStages([stage(log, 'a', undefined), stage(log, 'b', undefined), stage(log, 'c', undefined)], subject);
  t.equal(ending, undefined, 'no stage ended the request');
  t.same(log, ['a', 'b', 'c']);
  t.same(subject, ['a', 'b', 'c'], 'each stage saw the same subject');
  t.end();
});

t.test('runStages(): the first ending stops the run', (t) => {
  const log: string[] = [];
  const ending = runStages([stage(log, 'a', undefined), stage(log, 'b', 'refused'), stage(log, 'c', undefined)], []);
  t.equal(ending, 'refused');
  t.same(log, ['a', 'b'], 'later stages never run');
  t.end();
});

t.test('runStages(): a stage that waits: the rest run once it answers', async (t) => {
  const log: string[] = [];
  const pending = runStages([stage(log, 'a', undefined), stage(log, 'b', undefined, true), stage(log, 'c', undefined), stage(log, 'd', 'end'), stage(log, 'e', undefined)], []);
  t.ok(pending instanceof Promise);
  t.same(log, ['a', 'b'], 'stages after the waiting one wait too');
  t.equal(await pending, 'end');
  t.same(log, ['a', 'b', 'c', 'd']);
});

t.test('runStages(): an ending from a stage that waited, and a failure', async (t) => {
  const log: string[] = [];
  t.equal(await runStages([stage(log, 'a', 'late refusal', true), stage(log, 'b', undefined)], []), 'late refusal');
  t.same(log, ['a']);
  const failing: Stage<string[], string> = () => Promise.reject(new Error('database down'));
  await t.rejects(runStages([failing, stage(log, 'never', undefined)], []) as Promise<unknown>, /database down/);
  t.notOk(log.includes('never'));
});
