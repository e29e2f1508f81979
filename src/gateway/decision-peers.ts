import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';

interface Logger {
  warn(object: object, message: string): void;
}

/** What this node answers other nodes with: a decision's record text (one JSON line), or none. */
export interface DecisionAnswers {
  find(requestId: string): string | undefined;
  /** One past the newest record's sequence number (records are numbered as they are made). */
  head(): number;
  /**
   * The records numbered `end - count` … `end - 1` that are still kept, newest first. By number, so
   * that parts of one answer neither repeat nor skip records made between them.
   */
  before(end: number, count: number): string[];
}

/**
 * The other nodes' decisions, asked for when needed: every node keeps its own (in process, nothing
 * sent per request) and answers the others' questions from them.
 */
export interface DecisionPeers {
  /** Starts answering the other nodes from `answers`. */
  answerWith(answers: DecisionAnswers): void;
  /** The record of `requestId` from whichever node holds it; undefined when none answers with it in time. */
  find(requestId: string): Promise<Buffer | undefined>;
  /** Every other node's last `limit` records (in no particular order), from those that answer in time. */
  latest(limit: number): Promise<Buffer[]>;
  close(): Promise<void>;
}

/** How long a question waits for the nodes that heard it (a node in a silent partition never answers). */
export const PEER_ANSWER_TIMEOUT_MS = 1000;
/**
 * Records per answer message. A node's answer to `latest` goes in parts, the event loop free between
 * them: the whole ring (10,000 records, ~6 MB) built and sent at once held every node's proxying for
 * 33–44 ms, and a ring of a million would not fit in one string.
 */
export const ANSWER_PART_RECORDS = 500;
const NEWLINE = 10;
const TAB = 9;

/**
 * Answers a `latest` question in parts: `send(records, last)` for each, the event loop free between
 * them; stops (with a last, empty part) once `deadline` (performance.now()) has passed, for the
 * asker has stopped waiting, or `stopped()` says this node is closing. A part that cannot be made
 * is told to `failed` and ends the answer (never a throw: this runs from the event loop).
 */
export function answerInParts(
  answers: DecisionAnswers,
  limit: number,
  deadline: number,
  stopped: () => boolean,
  send: (records: string[], last: boolean) => void,
  failed: (error: unknown) => void,
): void {
  let end = answers.head();
  let sent = 0;
  const part = () => {
    try {
      if (stopped() || performance.now() > deadline) return send([], true);
      const wanted = Math.min(ANSWER_PART_RECORDS, limit - sent);
      const records = answers.before(end, wanted);
      sent += records.length;
      end -= wanted;
      // Fewer than asked: the ring ends (or was overwritten) below them.
      const last = records.length < wanted || sent >= limit;
      send(records, last);
      if (!last) setImmediate(part);
    } catch (error) {
      failed(error);
      try {
        send([], true);
      } catch {
        // Nothing more to do: the asker's timeout ends its wait.
      }
    }
  };
  part();
}

/**
 * Answers a question from `answers` through `send`, whichever way it travels: a find in one part (the
 * record, or none), a latest in parts (answerInParts). False, with nothing sent, for a question
 * that asks neither.
 */
export function answerQuestion(
  answers: DecisionAnswers,
  question: { find?: unknown; latest?: unknown },
  deadline: number,
  stopped: () => boolean,
  send: (records: string[], last: boolean) => void,
  failed: (error: unknown) => void,
): boolean {
  if (typeof question.find === 'string') {
    const record = answers.find(question.find);
    send(record === undefined ? [] : [record], true);
  } else if (Number.isSafeInteger(question.latest) && (question.latest as number) > 0) {
    answerInParts(answers, question.latest as number, deadline, stopped, send, failed);
  } else return false;
  return true;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function isUuid(value: unknown): value is string {
  return typeof value === 'string' && UUID.test(value);
}

interface Question {
  /** Other nodes that heard it, once PUBLISH has said (undefined before). */
  heard: number | undefined;
  /** Nodes whose answer has come whole (its last part). */
  answered: number;
  records: Buffer[];
  /** True for find: the first record ends the question. */
  first: boolean;
  done(): void;
}

/**
 * Questions and answers over Redis pub/sub. A question goes to `<prefix>questions`, which every node
 * subscribes to; each other node answers on `<prefix>answers:<asker>`. PUBLISH says how many nodes
 * heard a question, so the asker waits for exactly those (itself among them, not answering), at
 * most PEER_ANSWER_TIMEOUT_MS. (A client that is no node, a monitor's PSUBSCRIBE, is counted too:
 * while one listens, every miss waits the whole timeout.) An answer comes in parts of at most
 * ANSWER_PART_RECORDS records: each part is the question's id, a tab and `1` on its last part (`0`
 * before), on its first line, then a record per line (JSON escapes line breaks inside one).
 */
export class RedisDecisionPeers implements DecisionPeers {
  private readonly node = randomUUID();
  private readonly questionsChannel: string;
  private readonly answersPrefix: string;
  private readonly answersChannel: string;
  private readonly questions = new Map<string, Question>();
  private answers: DecisionAnswers | undefined;
  /** Warnings given since Redis last answered (each once, not once per question). */
  private readonly warned = new Set<string>();
  private readonly subscribed: Promise<void>;
  private closed = false;

  /**
   * `publisher` is a command connection shared with others; `subscriber` is this exchange's own
   * (a subscribed connection takes no other commands).
   */
  constructor(
    private readonly publisher: Redis,
    private readonly subscriber: Redis,
    keyPrefix: string,
    private readonly log: Logger,
    private readonly timeoutMs = PEER_ANSWER_TIMEOUT_MS,
  ) {
    this.questionsChannel = `${keyPrefix}questions`;
    this.answersPrefix = `${keyPrefix}answers:`;
    this.answersChannel = `${this.answersPrefix}${this.node}`;
    subscriber.on('messageBuffer', (channel: Buffer, message: Buffer) => {
      // Inside ioredis's data handler: a throw here would end the process.
      try {
        this.received(channel.toString('utf8'), message);
      } catch (error) {
        this.warnOnce(error, 'a gateway decision question or answer could not be handled');
      }
    });
    subscriber.on('error', () => {});
    // On every (re)connection: a subscription made before an outage may not be the server's now.
    this.subscribed = new Promise((resolve) => {
      const subscribe = () =>
        subscriber.subscribe(this.questionsChannel, this.answersChannel).then(
          () => resolve(),
          (error: unknown) => {
            this.warnOnce(error, 'Redis unreachable: gateway decisions of other nodes cannot be looked up');
            resolve();
          },
        );
      subscriber.on('ready', subscribe);
      if (subscriber.status === 'ready') void subscribe();
      else if (subscriber.status === 'wait') subscriber.connect().catch(() => {}); // lazyConnect
    });
  }

  answerWith(answers: DecisionAnswers): void {
    this.answers = answers;
  }

  /** Resolves once this node hears questions and answers, or after `withinMs` (Redis down: it subscribes when Redis is back). */
  async start(withinMs = 2000): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.subscribed, new Promise<void>((resolve) => (timer = setTimeout(resolve, withinMs)))]);
    clearTimeout(timer);
  }

  async find(requestId: string): Promise<Buffer | undefined> {
    const [record] = await this.ask({ find: requestId }, true);
    return record;
  }

  latest(limit: number): Promise<Buffer[]> {
    return this.ask({ latest: limit }, false);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const question of this.questions.values()) question.done();
    this.subscriber.disconnect();
  }

  private ask(what: { find: string } | { latest: number }, first: boolean): Promise<Buffer[]> {
    const id = randomUUID();
    return new Promise<Buffer[]>((resolve) => {
      const timer = setTimeout(() => finish(), this.timeoutMs);
      const question: Question = { heard: undefined, answered: 0, records: [], first, done: () => finish() };
      const finish = () => {
        clearTimeout(timer);
        this.questions.delete(id);
        resolve(question.records);
      };
      this.questions.set(id, question);
      this.publisher.publish(this.questionsChannel, JSON.stringify({ id, from: this.node, ...what })).then(
        (heard) => {
          this.warned.clear();
          // The asker hears its own question too.
          question.heard = heard - 1;
          if (question.answered >= question.heard) finish();
        },
        (error: unknown) => {
          this.warnOnce(error, 'Redis unreachable: gateway decisions of other nodes cannot be looked up');
          finish();
        },
      );
    });
  }

  private received(channel: string, message: Buffer): void {
    if (channel === this.answersChannel) this.answered(message);
    else if (channel === this.questionsChannel) this.heard(message);
  }

  private answered(message: Buffer): void {
    const end = message.indexOf(NEWLINE);
    const head = end < 0 ? message : message.subarray(0, end);
    // `<id>\t<1 on the last part, else 0>`; a bare id is a whole answer (nodes of 2026-12-01's first version).
    const tab = head.indexOf(TAB);
    const question = this.questions.get(head.toString('latin1', 0, tab < 0 ? head.length : tab));
    if (!question) return; // answered after the timeout
    if (tab < 0 || head.toString('latin1', tab + 1) === '1') question.answered += 1;
    for (let start = end + 1; end >= 0 && start < message.length; ) {
      let stop = message.indexOf(NEWLINE, start);
      if (stop < 0) stop = message.length;
      if (stop > start) question.records.push(message.subarray(start, stop));
      start = stop + 1;
    }
    if ((question.first && question.records.length > 0) || (question.heard !== undefined && question.answered >= question.heard)) question.done();
  }

  private heard(message: Buffer): void {
    let question: { id?: unknown; from?: unknown; find?: unknown; latest?: unknown };
    try {
      question = JSON.parse(message.toString('utf8')) as typeof question;
    } catch {
      return;
    }
    const answers = this.answers;
    if (!answers || !isUuid(question?.id) || !isUuid(question.from) || question.from === this.node) return;
    const channel = `${this.answersPrefix}${question.from}`;
    const id = question.id;
    answerQuestion(
      answers,
      question,
      performance.now() + this.timeoutMs,
      () => this.closed,
      (records, last) => this.send(channel, `${id}\t${last ? 1 : 0}${records.length === 0 ? '' : `\n${records.join('\n')}`}`),
      (error) => this.warnOnce(error, 'a gateway decision question could not be answered'),
    );
  }

  private send(channel: string, answer: string): void {
    this.publisher.publish(channel, answer).then(() => this.warned.clear(), (error: unknown) => {
      this.warnOnce(error, 'Redis unreachable: this node\'s gateway decisions cannot be given to the others');
    });
  }

  private warnOnce(error: unknown, message: string): void {
    if (this.warned.has(message)) return;
    this.warned.add(message);
    this.log.warn({ err: error instanceof Error ? error.message : String(error) }, message);
  }
}
