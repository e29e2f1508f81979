import { createHmac } from 'node:crypto';
import { ConfigError } from '../config.ts';
import type { EntityManager, Store } from '../store/database.ts';

/**
 * What the nodes sharing a database must agree on: each token key set and the secret pepper, as
 * fingerprints. A fingerprint is an HMAC of a fixed label under the material, so the table says
 * which keys are in use without holding anything that helps to find them.
 */
export interface KeySetFingerprints {
  /** The row: 'fernet', 'jws' or 'secret_pepper'. */
  name: string;
  /** The key that signs (Fernet: the primary key; JWS: the signing key; the pepper itself). */
  primary: string;
  /** The staged key, which becomes primary at the next rotation (Keystone's key 0), when known. */
  staged?: string | undefined;
  /** Every key that tokens are accepted with, the primary and the staged one included. */
  all: string[];
}

const LABEL = 'keystone-gateway/key-fingerprint/v1/';

export function fingerprint(kind: string, material: Buffer): string {
  return createHmac('sha256', material).update(LABEL + kind, 'utf8').digest('base64url');
}

/** Fernet keys in Keystone's load order: primary first, staged key 0 last. */
export function fernetFingerprints(keys: readonly Buffer[]): KeySetFingerprints {
  const all = keys.map((key) => fingerprint('fernet', key));
  return { name: 'fernet', primary: all[0]!, staged: all.length > 1 ? all[all.length - 1] : undefined, all };
}

/** JWS keys by their public JWK thumbprints (public already, on /v3/auth/jwks). */
export function jwsFingerprints(signing: string, verifying: readonly { name: string; thumbprint: string }[]): KeySetFingerprints {
  // Database keys are numbered like Fernet keys, 0 staged; key files have no staged key.
  return { name: 'jws', primary: signing, staged: verifying.find((key) => key.name === '0')?.thumbprint, all: verifying.map((key) => key.thumbprint) };
}

export function pepperFingerprint(pepper: Buffer): KeySetFingerprints {
  const value = fingerprint('secret_pepper', pepper);
  return { name: 'secret_pepper', primary: value, all: [value] };
}

/**
 * Two key sets agree when at most one rotation lies between them: the primary of one is among the
 * keys of the other, so tokens of one validate on the other (Keystone's staged key makes that hold
 * in both directions while nodes receive a rotation one after another). Independently generated
 * key sets never agree; a pepper agrees only with itself.
 */
export function keySetsAgree(mine: KeySetFingerprints, recorded: KeySetFingerprints): boolean {
  return recorded.all.includes(mine.primary) || mine.all.includes(recorded.primary);
}

/** `mine` is a rotation ahead of `recorded`: its staged key was promoted, or its primary demoted. */
function ahead(mine: KeySetFingerprints, recorded: KeySetFingerprints): boolean {
  if (mine.primary === recorded.primary) return false;
  if (recorded.staged !== undefined && mine.primary === recorded.staged) return true;
  return mine.all.includes(recorded.primary) && recorded.primary !== mine.staged;
}

function sameSet(a: KeySetFingerprints, b: KeySetFingerprints): boolean {
  return a.primary === b.primary && a.staged === b.staged && a.all.length === b.all.length && a.all.every((value, index) => value === b.all[index]);
}

/** Rolls back a reconcile that found a disagreement. */
class Disagreement extends Error {
  constructor(readonly names: string[]) {
    super(`disagreeing: ${names.join(', ')}`);
  }
}

/** This node's keys or pepper differ from those of the other nodes on the database. */
export class KeyDisagreementError extends ConfigError {
  override name = 'KeyDisagreementError';
}

/** The message of a disagreement: what differs, and what an operator sets on every node. */
export function disagreementMessage(names: readonly string[], keysWhere: string): string {
  const parts = names.map((name) =>
    name === 'secret_pepper'
      ? 'a different SECRET_PEPPER (application credentials stored by one node would fail on the other)'
      : `different ${name} token keys than this node's, from ${keysWhere} (tokens issued by one node would be refused by the other)`,
  );
  return (
    `the other nodes sharing DATABASE_URL use ${parts.join(' and ')}. ` +
    'Every node needs the same token keys: the same KEY_ENCRYPTION_KEY (keys in the database) or the same key repository files, synchronized after each rotation; ' +
    'and the same SECRET_PEPPER (a node without it generates its own in DATA_DIR/secret-pepper). ' +
    'If the keys or the pepper were replaced on purpose, stop every node and run `npm run manage -- forget_key_fingerprints`.'
  );
}

interface FingerprintRow {
  name: string;
  primary_fingerprint: string;
  staged_fingerprint: string | null;
  fingerprints: string;
}

function fromRow(row: FingerprintRow): KeySetFingerprints {
  return { name: row.name, primary: row.primary_fingerprint, staged: row.staged_fingerprint ?? undefined, all: row.fingerprints.split(' ') };
}

/** Writes `set` as the recorded one, replacing any (in the caller's transaction). */
export async function recordFingerprints(em: EntityManager, set: KeySetFingerprints): Promise<void> {
  await em.execute(
    `insert into key_fingerprint (name, primary_fingerprint, staged_fingerprint, fingerprints, updated_at) values (?, ?, ?, ?, now())
       on conflict (name) do update set primary_fingerprint = excluded.primary_fingerprint, staged_fingerprint = excluded.staged_fingerprint,
         fingerprints = excluded.fingerprints, updated_at = excluded.updated_at`,
    [set.name, set.primary, set.staged ?? null, set.all.join(' ')],
  );
}

/**
 * The key_fingerprint table: the first node records its key sets and pepper; every later node (and
 * every key reload) is compared with them. A set a rotation ahead replaces the record, so rotations
 * distributed node by node (Keystone style) are followed.
 */
export class KeyAgreement {
  constructor(private readonly store: Store) {}

  /**
   * Records each set that has no record yet (race-safe: the first of two nodes starting together
   * wins, the other compares with it), moves a record forward to a set a rotation ahead, and answers
   * the name of each set that disagrees with its record.
   */
  async reconcile(sets: readonly KeySetFingerprints[]): Promise<string[]> {
    try {
      await this.store.reader().transactional(async (transaction) => {
        const em = transaction as EntityManager;
        const disagreeing: string[] = [];
        for (const set of sets) {
          await em.execute(
            'insert into key_fingerprint (name, primary_fingerprint, staged_fingerprint, fingerprints) values (?, ?, ?, ?) on conflict (name) do nothing',
            [set.name, set.primary, set.staged ?? null, set.all.join(' ')],
          );
          const rows = await em.execute<FingerprintRow[]>(
            'select name, primary_fingerprint, staged_fingerprint, fingerprints from key_fingerprint where name = ? for update',
            [set.name],
          );
          const recorded = fromRow(rows[0]!);
          if (!keySetsAgree(set, recorded)) disagreeing.push(set.name);
          else if (!sameSet(set, recorded) && ahead(set, recorded)) await recordFingerprints(em, set);
        }
        // A node that disagrees on anything records nothing (rolled back).
        if (disagreeing.length > 0) throw new Disagreement(disagreeing);
      });
      return [];
    } catch (error) {
      if (error instanceof Disagreement) return error.names;
      throw error;
    }
  }

  /** Read-only: the names of the sets that disagree with their records (a missing record agrees). */
  async disagreeing(sets: readonly KeySetFingerprints[]): Promise<string[]> {
    if (sets.length === 0) return [];
    const rows = await this.store
      .reader()
      .execute<FingerprintRow[]>(
        `select name, primary_fingerprint, staged_fingerprint, fingerprints from key_fingerprint where name in (${sets.map(() => '?').join(', ')})`,
        sets.map((set) => set.name),
      );
    const recorded = new Map(rows.map((row) => [row.name, fromRow(row)]));
    return sets.filter((set) => recorded.has(set.name) && !keySetsAgree(set, recorded.get(set.name)!)).map((set) => set.name);
  }

  /** forget_key_fingerprints: the next node to start records its own. */
  async forget(): Promise<number> {
    const rows = await this.store.reader().execute<{ name: string }[]>('delete from key_fingerprint returning name');
    return rows.length;
  }
}

interface Logger {
  error(object: object, message: string): void;
  info(object: object, message: string): void;
}

export interface NodeKeyAgreementOptions {
  /** This node's key set (read again after every reload) and pepper. */
  sets: () => KeySetFingerprints[];
  /** Where the token keys come from, for messages (a directory, or the database). */
  keysWhere: string;
  /** How often the records are compared again (another node may have rotated). */
  checkIntervalMs: number;
  log: Logger;
}

/**
 * One node's side: refuses to start on a disagreement, follows key reloads (recording a set a
 * rotation ahead) and compares again every checkIntervalMs, for /readyz.
 */
export class NodeKeyAgreement {
  private disagreeing: string[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** Checks run one after another, so an older answer never replaces a newer one. */
  private checks: Promise<void> = Promise.resolve();

  constructor(
    private readonly agreement: KeyAgreement,
    private readonly options: NodeKeyAgreementOptions,
  ) {}

  /** At start: records or compares; throws KeyDisagreementError naming what differs. */
  async establish(): Promise<void> {
    const disagreeing = await this.agreement.reconcile(this.options.sets());
    if (disagreeing.length > 0) throw new KeyDisagreementError(this.message(disagreeing));
    this.timer = setInterval(() => this.enqueue(() => this.agreement.disagreeing(this.options.sets())), this.options.checkIntervalMs);
    this.timer.unref();
  }

  /** The token keys changed here (a rotation, new files): compared, and recorded when a rotation ahead. */
  keysReloaded(): void {
    this.enqueue(() => this.agreement.reconcile(this.options.sets()));
  }

  /** Null when this node agrees with the records; else what differs (readyz, log). */
  get problem(): string | null {
    return this.disagreeing.length > 0 ? this.message(this.disagreeing) : null;
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private enqueue(check: () => Promise<string[]>): void {
    this.checks = this.checks.then(() =>
      check().then(
        (disagreeing) => {
          const known = this.disagreeing.join(' ');
          this.disagreeing = disagreeing;
          if (disagreeing.join(' ') === known) return;
          if (disagreeing.length > 0) this.options.log.error({ disagreeing }, this.message(disagreeing));
          else this.options.log.info({}, 'token keys and secret pepper agree with the other nodes again');
        },
        // The database is unreachable or the query failed: the last answer stands (readyz reports the database).
        () => {},
      ),
    );
  }

  private message(names: string[]): string {
    return disagreementMessage(names, this.options.keysWhere);
  }
}
