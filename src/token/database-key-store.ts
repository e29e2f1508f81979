import { createCipheriv, createDecipheriv, createPublicKey, randomBytes } from 'node:crypto';
import { calculateJwkThumbprint, exportJWK, exportPKCS8, exportSPKI, generateKeyPair, importSPKI } from 'jose';
import { ConfigError } from '../config.ts';
import type { EntityManager, Store } from '../store/database.ts';
import { databaseUnreachableReason } from '../store/unavailable.ts';
import type { FernetKeyRepository } from './fernet-key-repository.ts';
import { fernetFingerprints, jwsFingerprints, recordFingerprints, type KeySetFingerprints } from './key-agreement.ts';
import type { JwsKeyRepository } from './jws-key-repository.ts';
import type { FernetKeySource, JwsKeys, JwsKeySource, KeySetupOutcome } from './key-source.ts';

/** Token keys (fernet, jws) and Keystone's credential keys (Fernet keys of the credential blobs). */
export type KeyProvider = 'fernet' | 'jws' | 'credential';

/** The keys in the database cannot be decrypted: KEY_ENCRYPTION_KEY is not the one they were stored with. */
export class KeyEncryptionKeyError extends ConfigError {
  override name = 'KeyEncryptionKeyError';
}

/** The database holds no keys to load or rotate, or holds keys that are not usable. */
export class DatabaseKeyStoreError extends Error {
  override name = 'DatabaseKeyStoreError';
}

interface StoredKey {
  number: number;
  /** Plaintext key material; never logged. */
  material: Buffer;
}

interface KeyRow {
  number: number;
  nonce: Buffer;
  ciphertext: Buffer;
}

const STAGED_KEY = 0;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

/** Binds a ciphertext to its row: a key copied to another provider or number does not decrypt. */
function associatedData(provider: KeyProvider, number: number): Buffer {
  return Buffer.from(`keystone-gateway/token_key/${provider}/${number}`, 'utf8');
}

/**
 * Token keys in the database, each encrypted with AES-256-GCM under KEY_ENCRYPTION_KEY. Setup and
 * rotation lock the provider's token_key_generation row, so concurrent rotators (two nodes, two
 * manage commands) run one after another, and bump its generation, which nodes poll.
 * `previousKeyEncryptionKeys` still decrypt (nothing is written with them): the window in which
 * every node has the new key and `reencrypt_keys` moves the rows over.
 */
export class DatabaseKeyStore {
  constructor(
    readonly store: Store,
    private readonly keyEncryptionKey: Buffer,
    private readonly previousKeyEncryptionKeys: readonly Buffer[] = [],
  ) {
    for (const key of [keyEncryptionKey, ...previousKeyEncryptionKeys]) {
      if (key.length !== 32) throw new RangeError('a key encryption key must be 32 bytes');
    }
  }

  /** The provider's key generation: changes with every setup and rotation (one indexed row). */
  async generation(provider: KeyProvider): Promise<string | undefined> {
    const rows = await this.store.reader().execute<{ generation: string }[]>('select generation::text as generation from token_key_generation where provider = ?', [provider]);
    return rows[0]?.generation;
  }

  async count(provider: KeyProvider): Promise<number> {
    const rows = await this.store.reader().execute<{ count: number }[]>('select count(*)::int as count from token_key where provider = ?', [provider]);
    return rows[0]?.count ?? 0;
  }

  /** Every key, highest number first (staged key 0 last), decrypted, and the generation they belong to. */
  async read(provider: KeyProvider): Promise<{ generation: string | undefined; keys: StoredKey[] }> {
    // One statement, one snapshot: the generation is the one of exactly these keys.
    const rows = await this.store.reader().execute<(KeyRow & { generation: string | null })[]>(
      `select k.number, k.nonce, k.ciphertext, (select g.generation::text from token_key_generation g where g.provider = ?) as generation
         from token_key k where k.provider = ? order by k.number desc`,
      [provider, provider],
    );
    const generation = rows.length > 0 ? (rows[0]!.generation ?? undefined) : await this.generation(provider);
    return { generation, keys: rows.map((row) => ({ number: row.number, material: this.decrypt(provider, row) })) };
  }

  /** Stores the keys `create` makes unless the provider has keys already; 'present' if it had. */
  async setup(provider: KeyProvider, create: () => Promise<{ outcome: 'created' | 'imported'; keys: StoredKey[] }>): Promise<KeySetupOutcome> {
    return this.store.reader().transactional(async (em) => {
      await this.lock(em as EntityManager, provider);
      const existing = await (em as EntityManager).execute<{ count: number }[]>('select count(*)::int as count from token_key where provider = ?', [provider]);
      if ((existing[0]?.count ?? 0) > 0) return 'present';
      const { outcome, keys } = await create();
      for (const key of keys) await this.insert(em as EntityManager, provider, key);
      await this.bump(em as EntityManager, provider);
      await this.recordFingerprints(em as EntityManager, provider);
      return outcome;
    });
  }

  /**
   * keystone-manage's rotation, in one transaction: staged key 0 becomes the new primary (every node
   * already holds it, so its tokens validate everywhere before nodes reload), `fresh` becomes the
   * staged key, and the oldest non-staged keys go until `keepNonStaged` remain.
   */
  async rotate(provider: KeyProvider, fresh: Buffer, keepNonStaged: number): Promise<void> {
    await this.store.reader().transactional(async (transaction) => {
      const em = transaction as EntityManager;
      await this.lock(em, provider);
      const rows = await em.execute<KeyRow[]>('select number, nonce, ciphertext from token_key where provider = ? order by number desc', [provider]);
      const staged = rows.find((row) => row.number === STAGED_KEY);
      if (!staged) throw new DatabaseKeyStoreError(`the database has no staged ${provider} key 0 to promote (run ${provider}_setup)`);
      const newPrimary = rows[0]!.number + 1;
      // The ciphertext is bound to its number: the promoted key is encrypted again under its new one.
      const promoted = this.decrypt(provider, staged);
      await em.execute('delete from token_key where provider = ? and number = ?', [provider, STAGED_KEY]);
      await this.insert(em, provider, { number: newPrimary, material: promoted });
      await this.insert(em, provider, { number: STAGED_KEY, material: fresh });
      const active = [newPrimary, ...rows.filter((row) => row !== staged).map((row) => row.number)];
      const purged = active.slice(Math.max(0, keepNonStaged));
      if (purged.length > 0) await em.execute(`delete from token_key where provider = ? and number in (${purged.map(() => '?').join(', ')})`, [provider, ...purged]);
      await this.bump(em, provider);
      await this.recordFingerprints(em, provider);
    });
  }

  /**
   * Encrypts every key of `provider` again under the current KEY_ENCRYPTION_KEY (whichever of the
   * keys each row was stored with), in one locked transaction. The key material and the generation
   * do not change, so nodes have nothing to reload. Returns how many keys were re-encrypted.
   */
  async reencrypt(provider: KeyProvider): Promise<number> {
    return this.store.reader().transactional(async (transaction) => {
      const em = transaction as EntityManager;
      await this.lock(em, provider);
      const rows = await em.execute<KeyRow[]>('select number, nonce, ciphertext from token_key where provider = ? for update', [provider]);
      const keys = rows.map((row) => ({ number: row.number, material: this.decrypt(provider, row) }));
      await em.execute('delete from token_key where provider = ?', [provider]);
      for (const key of keys) await this.insert(em, provider, key);
      return keys.length;
    });
  }

  /** Serialises setups and rotations of one provider across every node (the row lock lasts until commit). */
  private async lock(em: EntityManager, provider: KeyProvider): Promise<void> {
    await em.execute('insert into token_key_generation (provider, generation) values (?, 0) on conflict (provider) do nothing', [provider]);
    await em.execute('select generation from token_key_generation where provider = ? for update', [provider]);
  }

  /**
   * The keys in the database are the ones every KEY_ENCRYPTION_KEY node uses: their fingerprints
   * become the record at once, so a node whose own keys differ is told (key_fingerprint).
   */
  private async recordFingerprints(em: EntityManager, provider: KeyProvider): Promise<void> {
    // Credential keys live only here: every node reads the same ones, there is nothing to agree on.
    if (provider === 'credential') return;
    const rows = await em.execute<KeyRow[]>('select number, nonce, ciphertext from token_key where provider = ? order by number desc', [provider]);
    const keys = rows.map((row) => ({ number: row.number, material: this.decrypt(provider, row) }));
    await recordFingerprints(em, await storedKeyFingerprints(provider, keys));
  }

  private async bump(em: EntityManager, provider: KeyProvider): Promise<void> {
    await em.execute('update token_key_generation set generation = generation + 1 where provider = ?', [provider]);
  }

  private async insert(em: EntityManager, provider: KeyProvider, key: StoredKey): Promise<void> {
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.keyEncryptionKey, nonce);
    cipher.setAAD(associatedData(provider, key.number));
    const ciphertext = Buffer.concat([cipher.update(key.material), cipher.final(), cipher.getAuthTag()]);
    await em.execute('insert into token_key (provider, number, nonce, ciphertext) values (?, ?, ?, ?)', [provider, key.number, nonce, ciphertext]);
  }

  private decrypt(provider: KeyProvider, row: KeyRow): Buffer {
    for (const keyEncryptionKey of [this.keyEncryptionKey, ...this.previousKeyEncryptionKeys]) {
      try {
        const decipher = createDecipheriv('aes-256-gcm', keyEncryptionKey, row.nonce);
        decipher.setAAD(associatedData(provider, row.number));
        decipher.setAuthTag(row.ciphertext.subarray(row.ciphertext.length - TAG_BYTES));
        return Buffer.concat([decipher.update(row.ciphertext.subarray(0, row.ciphertext.length - TAG_BYTES)), decipher.final()]);
      } catch {
        // Not this key (or a damaged row): try the next.
      }
    }
    throw new KeyEncryptionKeyError(
      `the ${provider} token keys in the database do not decrypt with KEY_ENCRYPTION_KEY${this.previousKeyEncryptionKeys.length ? ' or KEY_ENCRYPTION_KEY_PREVIOUS' : ''}: it is not the key they were stored with (every node must have the same KEY_ENCRYPTION_KEY), or a key row is damaged`,
    );
  }
}

/** Fingerprints of stored keys (highest number first), as the token providers compute them once loaded. */
async function storedKeyFingerprints(provider: KeyProvider, keys: StoredKey[]): Promise<KeySetFingerprints> {
  if (provider === 'fernet') return fernetFingerprints(keys.map((key) => key.material));
  const verifying: { name: string; thumbprint: string }[] = [];
  for (const key of keys) {
    const pair = JSON.parse(key.material.toString('utf8')) as Partial<JwsKeyPair>;
    const thumbprint = await calculateJwkThumbprint(await exportJWK(await importSPKI(pair.publicKey!, 'ES256', { extractable: true })));
    verifying.push({ name: String(key.number), thumbprint });
  }
  return jwsFingerprints(verifying[0]!.thumbprint, verifying);
}

/** How nodes tell each other that keys changed (the event bus); polling covers a lost notice. */
export interface KeyChangeNotices {
  /** Tell the other nodes. */
  publish(): void;
  /** Hear the other nodes (and the manage CLI); returns a function that stops listening. */
  subscribe(listener: () => void): () => void;
}

interface Logger {
  warn(object: object, message: string): void;
  info(object: object, message: string): void;
}

export interface DatabaseKeySourceOptions {
  /** How often the key generation is compared with the loaded one (KEY_RELOAD_INTERVAL_MS). */
  reloadIntervalMs: number;
  notices?: KeyChangeNotices | undefined;
  log?: Logger | undefined;
}

/** What the two database-backed sources share: loading by generation, polling, notices. */
abstract class DatabaseKeySource<Keys> {
  readonly description = 'the database (KEY_ENCRYPTION_KEY)';
  /** Generation of the keys the last load() returned. */
  private loadedGeneration: string | undefined;
  private readonly localListeners = new Set<() => void>();

  constructor(
    protected readonly keys: DatabaseKeyStore,
    protected readonly provider: KeyProvider,
    private readonly options: DatabaseKeySourceOptions,
  ) {}

  async exists(): Promise<boolean> {
    return (await this.keys.count(this.provider)) > 0;
  }

  async load(): Promise<Keys> {
    const { generation, keys } = await this.keys.read(this.provider);
    if (keys.length === 0) throw new DatabaseKeyStoreError(`the database has no ${this.provider} keys (run ${this.provider}_setup)`);
    const decoded = this.decode(keys);
    this.loadedGeneration = generation;
    return decoded;
  }

  /**
   * Polls the generation every reloadIntervalMs (nodes without Redis converge that way) and hears
   * notices from the bus at once. Requests never read the database for keys.
   */
  watch(onChange: () => void): () => void {
    let polling = false;
    let failing = false;
    let stopped = false;
    // One indexed row: reload only when the generation differs from the loaded keys'.
    const check = () =>
      this.keys.generation(this.provider).then(
        (generation) => {
          if (failing) this.options.log?.info({}, 'token key generation readable again');
          failing = false;
          if (generation !== this.loadedGeneration && !stopped) onChange();
        },
        (error: unknown) => {
          // Once per outage: the database check of readyz reports it meanwhile.
          // The reason only: a driver error quotes its statement.
          if (!failing) this.options.log?.warn({ reason: databaseUnreachableReason(error) ?? 'query failed' }, 'cannot read the token key generation; keeping the loaded keys');
          failing = true;
        },
      );
    const timer = setInterval(() => {
      if (polling) return;
      polling = true;
      void check().finally(() => {
        polling = false;
      });
    }, this.options.reloadIntervalMs);
    timer.unref();
    // A notice is not skipped for a poll in flight: that poll may have read before the rotation committed.
    const unsubscribe = this.options.notices?.subscribe(() => void check());
    this.localListeners.add(onChange);
    return () => {
      stopped = true;
      clearInterval(timer);
      unsubscribe?.();
      this.localListeners.delete(onChange);
    };
  }

  /** After a setup or rotation here: this node reloads now, the others when the notice arrives. */
  protected changed(): void {
    for (const listener of this.localListeners) listener();
    this.options.notices?.publish();
  }

  protected abstract decode(keys: StoredKey[]): Keys;
}

/** Fernet keys in the database: Keystone's numbering (0 staged, highest primary) and rotation. */
export class DatabaseFernetKeys extends DatabaseKeySource<Buffer[]> implements FernetKeySource {
  constructor(
    keys: DatabaseKeyStore,
    readonly maxActiveKeys: number,
    options: DatabaseKeySourceOptions & {
      /** FERNET_KEY_REPOSITORY (CREDENTIAL_KEY_REPOSITORY): its keys are imported once into an empty database. */
      importFrom?: FernetKeyRepository | undefined;
      /** Token keys (the default) or credential keys: the same Fernet keys and rotation. */
      provider?: 'fernet' | 'credential';
    },
  ) {
    super(keys, options.provider ?? 'fernet', options);
    if (!Number.isInteger(maxActiveKeys) || maxActiveKeys < 1) throw new RangeError(`max active Fernet keys must be an integer of at least 1, got ${maxActiveKeys}`);
    this.importFrom = options.importFrom;
  }

  private readonly importFrom: FernetKeyRepository | undefined;

  async setup(): Promise<KeySetupOutcome> {
    const outcome = await this.keys.setup(this.provider, async () => {
      if (this.importFrom?.exists()) {
        return { outcome: 'imported', keys: this.importFrom.numberedKeys().map((entry) => ({ number: entry.number, material: entry.key })) };
      }
      // As fernet_setup leaves a repository: primary 1 and staged 0.
      return { outcome: 'created', keys: [{ number: 1, material: randomBytes(32) }, { number: STAGED_KEY, material: randomBytes(32) }] };
    });
    if (outcome !== 'present') this.changed();
    return outcome;
  }

  async rotate(): Promise<void> {
    // Keystone's purge: with max_active_keys = 1 even the new primary goes.
    await this.keys.rotate(this.provider, randomBytes(32), this.maxActiveKeys - 1);
    this.changed();
  }

  protected decode(keys: StoredKey[]): Buffer[] {
    for (const key of keys) {
      if (key.material.length !== 32) throw new DatabaseKeyStoreError(`Fernet key ${key.number} in the database is not 32 bytes`);
    }
    return keys.map((key) => key.material);
  }
}

interface JwsKeyPair {
  publicKey: string;
  privateKey: string;
}

async function newJwsKeyPair(): Promise<Buffer> {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  const pair: JwsKeyPair = { publicKey: await exportSPKI(publicKey), privateKey: await exportPKCS8(privateKey) };
  return Buffer.from(JSON.stringify(pair), 'utf8');
}

/**
 * ES256 key pairs in the database, numbered like Fernet keys: the highest signs, 0 is staged (its
 * public key is published and verifies, but it does not sign yet). A rotation promotes the staged
 * pair, so every node can verify the new signer's tokens before it reloads. JWS_MAX_ACTIVE_KEYS
 * counts the staged key; the signing key is always kept.
 */
export class DatabaseJwsKeys extends DatabaseKeySource<JwsKeys> implements JwsKeySource {
  private readonly importFrom: JwsKeyRepository | undefined;

  constructor(
    keys: DatabaseKeyStore,
    readonly maxActiveKeys: number,
    options: DatabaseKeySourceOptions & {
      /** JWS_KEY_REPOSITORY: its keys are imported once into an empty database. */
      importFrom?: JwsKeyRepository | undefined;
    },
  ) {
    super(keys, 'jws', options);
    if (!Number.isInteger(maxActiveKeys) || maxActiveKeys < 1) throw new RangeError('maxActiveKeys must be an integer >= 1');
    this.importFrom = options.importFrom;
  }

  async setup(): Promise<KeySetupOutcome> {
    const outcome = await this.keys.setup('jws', async () => {
      const imported = this.importFrom?.exists() ? importJwsFiles(this.importFrom) : undefined;
      if (imported) return { outcome: 'imported', keys: [...imported, { number: STAGED_KEY, material: await newJwsKeyPair() }] };
      return { outcome: 'created', keys: [{ number: 1, material: await newJwsKeyPair() }, { number: STAGED_KEY, material: await newJwsKeyPair() }] };
    });
    if (outcome !== 'present') this.changed();
    return outcome;
  }

  async rotate(): Promise<void> {
    // Generated before the transaction: the lock is held for a few statements only.
    await this.keys.rotate('jws', await newJwsKeyPair(), Math.max(1, this.maxActiveKeys - 1));
    this.changed();
  }

  protected decode(keys: StoredKey[]): JwsKeys {
    const pairs = keys.map((key) => {
      let pair: JwsKeyPair;
      try {
        pair = JSON.parse(key.material.toString('utf8')) as JwsKeyPair;
      } catch {
        throw new DatabaseKeyStoreError(`JWS key ${key.number} in the database is not a key pair`);
      }
      if (typeof pair.publicKey !== 'string') throw new DatabaseKeyStoreError(`JWS key ${key.number} in the database has no public key`);
      return { number: key.number, pair };
    });
    // Highest number first: it signs (the staged key 0 only verifies).
    const signing = pairs[0]!;
    if (typeof signing.pair.privateKey !== 'string') throw new DatabaseKeyStoreError(`JWS key ${signing.number} in the database has no private key`);
    return { privateKey: signing.pair.privateKey, publicKeys: pairs.map((entry) => ({ name: String(entry.number), pem: entry.pair.publicKey })) };
  }
}

/**
 * Keystone's JWS layout as database keys: the public keys that only verify become 1, 2, … (oldest
 * first), the signing pair the next number. Undefined when the signing key's public key is missing.
 */
function importJwsFiles(repository: JwsKeyRepository): StoredKey[] | undefined {
  const files = repository.load();
  const signingPublic = createPublicKey(files.privateKey).export({ type: 'spki', format: 'pem' }).toString().trim();
  const verifying = files.publicKeys.filter((file) => createPublicKey(file.pem).export({ type: 'spki', format: 'pem' }).toString().trim() !== signingPublic);
  if (verifying.length === files.publicKeys.length) return undefined;
  const keys: StoredKey[] = verifying
    .reverse()
    .map((file, index) => ({ number: index + 1, material: Buffer.from(JSON.stringify({ publicKey: file.pem } satisfies Partial<JwsKeyPair>), 'utf8') }));
  const signing: JwsKeyPair = { publicKey: signingPublic, privateKey: files.privateKey };
  keys.push({ number: keys.length + 1, material: Buffer.from(JSON.stringify(signing), 'utf8') });
  return keys;
}
