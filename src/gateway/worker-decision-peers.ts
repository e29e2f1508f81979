import type { Worker } from 'node:cluster';
import { answerQuestion, PEER_ANSWER_TIMEOUT_MS, type DecisionAnswers, type DecisionPeers } from './decision-peers.ts';

/**
 * The workers of one node without Redis (WORKERS > 1): a worker asked for a decision it does not
 * hold asks its siblings through the primary, as a metrics scrape gathers theirs
 * (metrics/cluster-metrics.ts). Messages between processes:
 *   worker → primary  ask      {id, find | latest}       a lookup this worker could not answer
 *   primary → worker  question {id, find | latest}       answer from your ring
 *   worker → primary  answer   {id, records, last}      in parts (ANSWER_PART_RECORDS), the last marked
 *   primary → worker  answers  {id, records, done}      each part as it comes; done once every
 *                                                        sibling has answered whole, or in time
 * Parts, not one message: a ring of 10,000 built at once held the worker 33–44 ms, and a large one
 * would not fit in one string (a throw in a message handler ends the process).
 */
type DecisionMessage =
  | ({ type: 'ask'; id: number } & Query)
  | ({ type: 'question'; id: number } & Query)
  | { type: 'answer'; id: number; records: string[]; last: boolean }
  | { type: 'answers'; id: number; records: string[]; done: boolean };

type Query = { find: string; latest?: undefined } | { latest: number; find?: undefined };

interface DecisionEnvelope {
  keystoneGatewayDecisions: DecisionMessage;
}

function decisionMessage(value: unknown): DecisionMessage | undefined {
  const message = (value as Partial<DecisionEnvelope> | null)?.keystoneGatewayDecisions;
  return typeof message === 'object' && message !== null && typeof message.id === 'number' ? message : undefined;
}

function envelope(message: DecisionMessage): DecisionEnvelope {
  return { keystoneGatewayDecisions: message };
}

function recordsOf(message: { records?: unknown }): string[] {
  return Array.isArray(message.records) ? message.records.filter((record): record is string => typeof record === 'string') : [];
}

/** A worker's side: asks its siblings (through the primary), and answers their questions from its ring. */
export class WorkerDecisionPeers implements DecisionPeers {
  private nextId = 1;
  private answers: DecisionAnswers | undefined;
  private closed = false;
  private readonly pending = new Map<number, { records: string[]; first: boolean; finish: () => void }>();
  private readonly listener = (raw: unknown) => {
    try {
      this.receive(raw);
    } catch {
      // A message we cannot handle: its asker's timeout ends the wait.
    }
  };

  constructor() {
    process.on('message', this.listener);
  }

  answerWith(answers: DecisionAnswers): void {
    this.answers = answers;
  }

  async find(requestId: string): Promise<Buffer | undefined> {
    const [record] = await this.ask({ find: requestId });
    return record === undefined ? undefined : Buffer.from(record);
  }

  async latest(limit: number): Promise<Buffer[]> {
    return (await this.ask({ latest: limit })).map((record) => Buffer.from(record));
  }

  async close(): Promise<void> {
    this.closed = true;
    process.off('message', this.listener);
    for (const question of [...this.pending.values()]) question.finish();
  }

  private ask(query: Query): Promise<string[]> {
    if (!process.connected || !process.send) return Promise.resolve([]);
    const id = this.nextId++;
    return new Promise((resolve) => {
      // The primary ends every question within its own timeout; this one is for a primary that never does.
      const timer = setTimeout(() => finish(), PEER_ANSWER_TIMEOUT_MS * 2);
      const question = { records: [] as string[], first: query.find !== undefined, finish: () => finish() };
      const finish = () => {
        clearTimeout(timer);
        this.pending.delete(id);
        resolve(question.records);
      };
      this.pending.set(id, question);
      process.send!(envelope({ type: 'ask', id, ...query }), undefined, undefined, (error) => {
        if (error) finish();
      });
    });
  }

  private receive(raw: unknown): void {
    const message = decisionMessage(raw);
    if (!message) return;
    if (message.type === 'answers') {
      const question = this.pending.get(message.id);
      if (!question) return;
      for (const record of recordsOf(message)) question.records.push(record);
      if (message.done === true || (question.first && question.records.length > 0)) question.finish();
    } else if (message.type === 'question') this.answer(message);
  }

  private answer(question: { id: number } & Query): void {
    const reply = (records: string[], last: boolean) => {
      if (process.connected && process.send) process.send(envelope({ type: 'answer', id: question.id, records, last }), undefined, undefined, () => {});
    };
    const answers = this.answers;
    // Not answering yet (still starting): an empty answer, so the asker does not wait for this worker.
    if (!answers) return reply([], true);
    // A question that asks neither: an empty answer all the same (the primary waits for one).
    if (!answerQuestion(answers, question, performance.now() + PEER_ANSWER_TIMEOUT_MS, () => this.closed, reply, () => {})) reply([], true);
  }
}

/** The primary's side: puts a worker's question to every other worker and hands their answers back as they come. */
export class PrimaryDecisionRelay {
  private nextId = 1;
  private readonly questions = new Map<number, { asker: Worker; askerId: number; waiting: Set<Worker>; first: boolean; found: boolean; done: () => void }>();

  /** Handles a decision message from `sender` (true), or leaves it to others (false). */
  handle(sender: Worker, raw: unknown, workers: Iterable<Worker>): boolean {
    const message = decisionMessage(raw);
    if (!message) return false;
    try {
      if (message.type === 'ask') this.ask(sender, message, workers);
      else if (message.type === 'answer') this.answer(sender, message.id, recordsOf(message), message.last === true);
    } catch {
      // A message we cannot handle: its asker's timeout ends the wait.
    }
    return true;
  }

  /** `worker` is gone: no question waits for it any longer. */
  forget(worker: Worker): void {
    for (const [id] of this.questions) this.answer(worker, id, [], true);
  }

  private ask(asker: Worker, message: { id: number } & Query, workers: Iterable<Worker>): void {
    const id = this.nextId++;
    const query: Query = typeof message.find === 'string' ? { find: message.find } : { latest: Number(message.latest) };
    const waiting = new Set([...workers].filter((worker) => worker !== asker && worker.isConnected()));
    const done = () => {
      clearTimeout(timer);
      this.questions.delete(id);
      send(asker, { type: 'answers', id: message.id, records: [], done: true });
    };
    const timer = setTimeout(done, PEER_ANSWER_TIMEOUT_MS);
    this.questions.set(id, { asker, askerId: message.id, waiting, first: query.find !== undefined, found: false, done });
    for (const worker of waiting) {
      worker.send(envelope({ type: 'question', id, ...query }), (error: Error | null) => {
        if (error) this.answer(worker, id, [], true);
      });
    }
    if (waiting.size === 0) done();
  }

  private answer(worker: Worker, id: number, records: string[], last: boolean): void {
    const question = this.questions.get(id);
    if (!question || !question.waiting.has(worker)) return;
    if (last) question.waiting.delete(worker);
    // Each part on to the asker as it comes (a find's first record ends the question).
    if (records.length > 0) {
      send(question.asker, { type: 'answers', id: question.askerId, records, done: false });
      question.found = true;
    }
    if (question.waiting.size === 0 || (question.first && question.found)) question.done();
  }
}

function send(worker: Worker, message: DecisionMessage): void {
  if (worker.isConnected()) worker.send(envelope(message), () => {});
}
