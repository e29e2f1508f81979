import t from 'tap';
import type { Worker } from 'node:cluster';
import { PrimaryDecisionRelay } from '../../src/gateway/worker-decision-peers.ts';

// The primary's relay of decision lookups between workers (no Redis), with stand-in workers: what
// each is sent, and when the asker is told the question is done.

interface Sent {
  type: string;
  id: number;
  records?: string[];
  done?: boolean;
  last?: boolean;
  find?: string;
  latest?: number;
}

function worker(name: string, connected = true) {
  const sent: Sent[] = [];
  const stand = {
    name,
    connected,
    isConnected: () => stand.connected,
    send: (message: { keystoneGatewayDecisions: Sent }, callback?: (error: Error | null) => void) => {
      sent.push(message.keystoneGatewayDecisions);
      callback?.(null);
      return true;
    },
  };
  return { worker: stand as unknown as Worker, sent, stand };
}

const wrap = (message: object) => ({ keystoneGatewayDecisions: message });

t.test('a find: asked of every other connected worker; the first record ends it, at once', async (t) => {
  const relay = new PrimaryDecisionRelay();
  const asker = worker('asker');
  const a = worker('a');
  const b = worker('b');
  const gone = worker('gone', false);
  const all = [asker.worker, a.worker, b.worker, gone.worker];
  t.ok(relay.handle(asker.worker, wrap({ type: 'ask', id: 7, find: 'req-x' }), all));
  t.same(asker.sent, [], 'not asked of itself');
  t.same(gone.sent, [], 'nor of a worker that is gone');
  t.match(a.sent, [{ type: 'question', find: 'req-x' }]);
  const questionId = a.sent[0]!.id;
  relay.handle(a.worker, wrap({ type: 'answer', id: questionId, records: [], last: true }), all);
  t.same(asker.sent, [], 'one sibling has not found it: still waiting for the other');
  relay.handle(b.worker, wrap({ type: 'answer', id: questionId, records: ['{"r":1}'], last: true }), all);
  t.same(asker.sent, [{ type: 'answers', id: 7, records: ['{"r":1}'], done: false }, { type: 'answers', id: 7, records: [], done: true }], 'the record, then done');
  relay.handle(b.worker, wrap({ type: 'answer', id: questionId, records: ['late'], last: true }), all);
  t.equal(asker.sent.length, 2, 'a late answer goes nowhere');
  t.notOk(relay.handle(a.worker, { other: 1 }, all), 'not a decision message: left to others');
  t.ok(relay.handle(a.worker, wrap({ type: 'answer', id: 'x' }), all) === false, 'no numeric id: not ours');
});

t.test('a latest: parts passed on as they come; done when every sibling sent its last part, or is gone', async (t) => {
  const relay = new PrimaryDecisionRelay();
  const asker = worker('asker');
  const a = worker('a');
  const b = worker('b');
  const all = [asker.worker, a.worker, b.worker];
  relay.handle(asker.worker, wrap({ type: 'ask', id: 3, latest: 1000 }), all);
  const questionId = a.sent[0]!.id;
  relay.handle(a.worker, wrap({ type: 'answer', id: questionId, records: ['a1', 'a2'], last: false }), all);
  relay.handle(a.worker, wrap({ type: 'answer', id: questionId, records: ['a3'], last: true }), all);
  t.same(asker.sent.map((message) => [message.records, message.done]), [[['a1', 'a2'], false], [['a3'], false]], 'passed on, not done: b has not answered');
  // b dies before answering: forgotten, the question is done without waiting for the timeout.
  relay.forget(b.worker);
  t.same(asker.sent.at(-1), { type: 'answers', id: 3, records: [], done: true });
  t.equal(asker.sent.length, 3);
});

t.test('no other worker: done at once; a malformed answer is harmless', async (t) => {
  const relay = new PrimaryDecisionRelay();
  const asker = worker('asker');
  relay.handle(asker.worker, wrap({ type: 'ask', id: 1, find: 'req-y' }), [asker.worker]);
  t.same(asker.sent, [{ type: 'answers', id: 1, records: [], done: true }]);
  const a = worker('a');
  relay.handle(asker.worker, wrap({ type: 'ask', id: 2, latest: 5 }), [asker.worker, a.worker]);
  relay.handle(a.worker, wrap({ type: 'answer', id: a.sent[0]!.id, records: 'not a list', last: true }), [asker.worker, a.worker]);
  t.same(asker.sent.at(-1), { type: 'answers', id: 2, records: [], done: true }, 'records that are not strings are dropped');
});
