import type { Worker } from 'node:cluster';
import { PEER_ANSWER_TIMEOUT_MS, type DecisionAnswers, type DecisionPeers } from './decision-peers.ts';

/**
 * The workers of one node without Redis (WORKERS > 1): a worker asked for a decision it does not
 * hold asks its siblings through the primary, as a metrics scrape gathers theirs
 * (metrics/cluster-metrics.ts). Messages between processes:
 *   worker → primary  ask      {id, find | latest}   a lookup this worker could not answer
 *   primary → worker  question {id, find | latest}   answer from your ring
 *   worker → primary  answer   {id, records}
 *   primary → worker  answers  {id, records}         every record that came in time
 */
type DecisionMessage =
  | ({ type: 'ask'; id: number } & Query)
  | ({ type: 'question'; id: number } & Query)
  | { type: 'answer'; id: number; records: string[] }
  | { type: 'answers'; id: number; records: string[] };

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

function records(message: { records?: unknown }): string[] {
  return Array.isArray(message.records) ? message.records.filter((record): record is string => typeof record === 'string') : [];
}

/** A worker's side: asks its siblings (through the primary), and answers their questions from its ring. */
export class WorkerDecisionPeers implements DecisionPeers {
  private nextId = 1;
  private answers: DecisionAnswers | undefined;
  private readonly pending = new Map<number, (records: string[]) => void>();
  private readonly listener = (raw: unknown) => this.receive(raw);

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
    process.off('message', this.listener);
    for (const finish of [...this.pending.values()]) finish([]);
  }

  private ask(query: Query): Promise<string[]> {
    if (!process.connected || !process.send) return Promise.resolve([]);
    const id = this.nextId++;
    return new Promise((resolve) => {
      // The primary answers within its own timeout; this one is for a primary that never does.
      const timer = setTimeout(() => finish([]), PEER_ANSWER_TIMEOUT_MS * 2);
      const finish = (records: string[]) => {
        clearTimeout(timer);
        this.pending.delete(id);
        resolve(records);
      };
      this.pending.set(id, finish);
      process.send!(envelope({ type: 'ask', id, ...query }), undefined, undefined, (error) => {
        if (error) finish([]);
      });
    });
  }

  private receive(raw: unknown): void {
    const message = decisionMessage(raw);
    if (!message) return;
    if (message.type === 'answers') this.pending.get(message.id)?.(records(message));
    else if (message.type === 'question' && this.answers && process.connected && process.send) {
      let answer: string[] = [];
      if (typeof message.find === 'string') {
        const record = this.answers.find(message.find);
        if (record !== undefined) answer = [record];
      } else if (Number.isSafeInteger(message.latest) && message.latest > 0) answer = this.answers.latest(0, message.latest);
      process.send(envelope({ type: 'answer', id: message.id, records: answer }), undefined, undefined, () => {});
    }
  }
}

/** The primary's side: puts a worker's question to every other worker and hands back what came in time. */
export class PrimaryDecisionRelay {
  private nextId = 1;
  private readonly questions = new Map<number, { records: string[]; waiting: Set<Worker>; first: boolean; done: () => void }>();

  /** Handles a decision message from `sender` (true), or leaves it to others (false). */
  handle(sender: Worker, raw: unknown, workers: Iterable<Worker>): boolean {
    const message = decisionMessage(raw);
    if (!message) return false;
    if (message.type === 'ask') this.ask(sender, message, workers);
    else if (message.type === 'answer') this.answer(sender, message.id, records(message));
    return true;
  }

  private ask(asker: Worker, message: { id: number } & Query, workers: Iterable<Worker>): void {
    const id = this.nextId++;
    const query: Query = typeof message.find === 'string' ? { find: message.find } : { latest: Number(message.latest) };
    const waiting = new Set([...workers].filter((worker) => worker !== asker && worker.isConnected()));
    const records: string[] = [];
    const done = () => {
      clearTimeout(timer);
      this.questions.delete(id);
      if (asker.isConnected()) asker.send(envelope({ type: 'answers', id: message.id, records }), () => {});
    };
    const timer = setTimeout(done, PEER_ANSWER_TIMEOUT_MS);
    this.questions.set(id, { records, waiting, first: query.find !== undefined, done });
    for (const worker of waiting) {
      worker.send(envelope({ type: 'question', id, ...query }), (error: Error | null) => {
        if (error) this.answer(worker, id, []);
      });
    }
    if (waiting.size === 0) done();
  }

  private answer(worker: Worker, id: number, answered: string[]): void {
    const question = this.questions.get(id);
    if (!question || !question.waiting.delete(worker)) return;
    for (const record of answered) question.records.push(record);
    if (question.waiting.size === 0 || (question.first && question.records.length > 0)) question.done();
  }
}
