import pg from 'pg';
import { call } from './keystone-client.ts';

/** What happened to one POST /v3/users. */
export interface WriteOutcome {
  name: string;
  /** HTTP status; 0 when the answer never came (connection lost, timeout). */
  status: number;
  sentAt: number;
  ms: number;
  body: any;
}

export interface UserWriter {
  readonly outcomes: WriteOutcome[];
  acknowledged(): number;
  /** Stops sending and waits for the requests under way. */
  stop(): Promise<void>;
}

/**
 * `concurrency` loops creating users with a password (two rows, one transaction), names
 * `{prefix}{n}`, sent to `urls` in turn (the test's own round-robin balancer).
 */
export function startUserWriter(urls: readonly string[], token: string, options: { prefix: string; concurrency: number }): UserWriter {
  const outcomes: WriteOutcome[] = [];
  let next = 0;
  let stopped = false;
  const loop = async () => {
    while (!stopped) {
      const index = next++;
      const name = `${options.prefix}${index}`;
      const sentAt = Date.now();
      const answer = await call(`${urls[index % urls.length]}/v3/users`, {
        method: 'POST',
        token,
        body: { user: { name, password: `Pw-${name}`, domain_id: 'default' } },
      });
      outcomes.push({ name, status: answer.status, sentAt, ms: answer.ms, body: answer.body });
      // Refused at once while the database is away: do not spin.
      if (answer.status !== 201) await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };
  const loops = Array.from({ length: options.concurrency }, loop);
  return {
    outcomes,
    acknowledged: () => outcomes.filter((outcome) => outcome.status === 201).length,
    async stop() {
      stopped = true;
      await Promise.all(loops);
    },
  };
}

export interface WriteAudit {
  acknowledged: string[];
  stored: string[];
  /** Acknowledged (201) but not in the database: lost writes. Must be empty. */
  lost: string[];
  /** In the database without a 201: their commit reached PostgreSQL but the answer was a 503 or lost. */
  committedUnacknowledged: WriteOutcome[];
  /** In the database but never sent, or answered with something that says it was not written. */
  unexplained: string[];
  /** Users of this writer without their password row (a half-done write). Must be empty. */
  halfDone: string[];
}

/**
 * Compares what the writer was told with what PostgreSQL holds (read directly, not through the
 * service). A request cut mid-commit is ambiguous: PostgreSQL may have committed it while the
 * service saw the connection break and answered 503 (or the client lost the answer). Such rows are
 * not lost writes; they are reported apart, and only a 503 or a lost answer may explain one.
 */
export async function auditWrites(databaseUrl: string, prefix: string, outcomes: readonly WriteOutcome[]): Promise<WriteAudit> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  let stored: string[];
  let halfDone: string[];
  try {
    const pattern = `${prefix.replace(/[\\%_]/g, (character) => `\\${character}`)}%`;
    stored = (await client.query<{ name: string }>('select name from identity_user where name like $1', [pattern])).rows.map((row) => row.name);
    halfDone = (
      await client.query<{ name: string }>(
        'select u.name from identity_user u where u.name like $1 and not exists (select 1 from password p where p.user_id = u.id and p.password_hash is not null)',
        [pattern],
      )
    ).rows.map((row) => row.name);
  } finally {
    await client.end();
  }
  const byName = new Map(outcomes.map((outcome) => [outcome.name, outcome]));
  const storedSet = new Set(stored);
  const acknowledged = outcomes.filter((outcome) => outcome.status === 201).map((outcome) => outcome.name);
  const committedUnacknowledged: WriteOutcome[] = [];
  const unexplained: string[] = [];
  for (const name of stored) {
    const outcome = byName.get(name);
    if (outcome?.status === 201) continue;
    if (outcome && (outcome.status === 503 || outcome.status === 0)) committedUnacknowledged.push(outcome);
    else unexplained.push(name);
  }
  return {
    acknowledged,
    stored,
    lost: acknowledged.filter((name) => !storedSet.has(name)),
    committedUnacknowledged,
    unexplained,
    halfDone,
  };
}
