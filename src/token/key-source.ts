/** What setting up a key store did: made new keys, imported Keystone's files, or found keys. */
export type KeySetupOutcome = 'created' | 'imported' | 'present';

/**
 * Where a token provider's keys live: a Keystone key repository on disk (the default) or the shared
 * database (KEY_ENCRYPTION_KEY). Providers load keys at start and on change, never per request.
 * Synchronous implementations stay synchronous, so file-based reloads swap keys at once.
 */
export interface KeySource<Keys> {
  /** Where the keys are, for log lines and errors (a directory, or "the database"); never key material. */
  readonly description: string;
  /** True when load() would succeed. */
  exists(): boolean | Promise<boolean>;
  /** fernet_setup / jws_setup: create keys unless there are some. */
  setup(): KeySetupOutcome | Promise<KeySetupOutcome>;
  load(): Keys | Promise<Keys>;
  /** fernet_rotate / jws_rotate. */
  rotate(): void | Promise<void>;
  /** Calls onChange whenever the keys may have changed; returns a function that stops watching. */
  watch(onChange: () => void): () => void;
}

/** Fernet keys in Keystone's load order: primary (highest number) first, staged key 0 last. */
export type FernetKeySource = KeySource<Buffer[]>;

/** ES256 PEMs: the signing key and every key tokens may be verified with, newest first. */
export interface JwsKeys {
  /** PEM of the signing key (PKCS#8). */
  privateKey: string;
  /** PEMs of every key tokens may be verified with (SPKI), newest first. */
  publicKeys: { name: string; pem: string }[];
}

export type JwsKeySource = KeySource<JwsKeys>;
