import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig, type Config } from '../config.ts';
import { GatewayPolicy } from '../policy/gateway-policy.ts';
import type { PolicyRequest, PolicyScope } from '../policy/gateway-policy-types.ts';
import { IdentityPolicy } from '../policy/identity-policy.ts';
import { PolicyLoadError } from '../policy/policy-files.ts';
import { FernetKeyRepository } from '../token/fernet-key-repository.ts';
import { CREDENTIAL_MAX_ACTIVE_KEYS } from '../credential/credential-encryption.ts';
import type { CredentialKeyMaintenance } from '../credential/credential-key-maintenance.ts';
import type { FernetKeySource } from '../token/key-source.ts';

// The application, database and JOSE modules load on demand: the policy commands need none of
// them, and they take several times longer to import than the policy engine.

const USAGE = `Usage: npm run manage -- <command>

Commands (configuration comes from the same environment variables as the service):
  bootstrap       create the Default domain, roles, admin user/project and identity endpoints
                  (idempotent; ADMIN_PASSWORD sets or resets the admin password)
  db_sync         apply database migrations
  fernet_setup    create the Fernet key repository (FERNET_KEY_REPOSITORY) if it has no keys
  fernet_rotate   rotate the Fernet keys, keeping FERNET_MAX_ACTIVE_KEYS
  jws_setup       create the JWS (ES256) key pair in JWS_KEY_REPOSITORY if there is none
  jws_rotate      add a new JWS key pair, keeping JWS_MAX_ACTIVE_KEYS public keys
                  (with KEY_ENCRYPTION_KEY the four key commands work on the database's keys,
                  and running nodes reload them: at once with REDIS_URL, else within
                  KEY_RELOAD_INTERVAL_MS)
  credential_setup
                  create the credential key repository (CREDENTIAL_KEY_REPOSITORY) if it has no keys
  credential_rotate
                  rotate the credential keys (three kept, as Keystone); refused while some
                  credential is encrypted with another key than the primary
  credential_migrate
                  encrypt every credential blob again with the primary credential key (run it
                  after credential_rotate, before the next one)
                  (with KEY_ENCRYPTION_KEY the credential keys are in the database too)
  reencrypt_keys  encrypt the database's token keys again under KEY_ENCRYPTION_KEY, reading
                  them with it or with KEY_ENCRYPTION_KEY_PREVIOUS (changing the key
                  encryption key: docs/operations.md)
  forget_key_fingerprints
                  forget the recorded fingerprints of the token keys and SECRET_PEPPER the
                  nodes sharing DATABASE_URL must agree on (after replacing them on purpose,
                  with every node stopped); the next node to start records its own
  policy test [DIR]
                  load the gateway policy in DIR (default POLICY_DIR, else ./policies) and the
                  identity policy (DIR/identity, default IDENTITY_POLICY_DIR), and run their
                  fixtures (tests/*.yaml in each);
                  exit 1 if either does not load or a case fails
  policy explain --service S --method M --path P --scope project|domain|system
                 [--roles a,b] [--project-id X] [--user-id U] [--dir DIR] [--json]
                  show how the gateway policy decides one request: the decision, the deciding
                  line (file:line) and every matching line; exit 0 whether allowed or denied
  policy replay --candidate DIR [--url URL] [--limit N] [--json]
                  decide a running deployment's recorded requests again with DIR's rule files
                  (POST /v3/gateway/policy/replay; OS_TOKEN: an admin token; URL defaults to
                  OS_AUTH_URL, else PUBLIC_URL) and list those that would change
  mapping_engine --rules FILE --input FILE [--prefix PREFIX] [--engine-debug]
                  run the federation mapping engine on a mapping's rules and an assertion
                  ("name: value" lines) and print the mapped properties (keystone-manage's)
  saml_setup [--days N]
                  create the SAML identity provider's signing key (SAML_KEYFILE) and self-signed
                  certificate (SAML_CERTFILE, N days, default 3650) with openssl, unless both exist
  saml_idp_metadata
                  print the identity provider's metadata (keystone-manage's): SAML_IDP_ENTITY_ID,
                  SAML_IDP_SSO_ENDPOINT, the SAML_IDP_* organisation and contact, SAML_CERTFILE
`;

const POLICY_USAGE = `Usage:
  npm run manage -- policy test [DIR]
  npm run manage -- policy explain --service S --method M --path P --scope project|domain|system
                                   [--roles a,b] [--project-id X] [--user-id U] [--dir DIR] [--json]
  npm run manage -- policy replay --candidate DIR [--url URL] [--limit N] [--json]   (OS_TOKEN: admin token)

  DIR defaults to POLICY_DIR, else ./policies. P is the canonical path after the service prefix
  (/compute/v2.1/x -> --path /v2.1/x). --roles lists the token's roles with implied roles
  included (default: none); --project-id is only meaningful with --scope project.
`;

/** Bad command-line arguments: reported with the usage, exit status 2. */
class UsageError extends Error {
  override name = 'UsageError';
  constructor(
    message: string,
    readonly usage: string,
  ) {
    super(message);
  }
}

/** Resolves to the exit status; undefined means 0. */
type Command = (config: Config, args: string[]) => Promise<number | void>;

const commands: Record<string, Command> = {
  async bootstrap(config) {
    if (!config.databaseUrl) fs.mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
    const { buildApplication } = await import('../app.ts');
    const { bootstrap } = await import('./bootstrap.ts');
    const app = await buildApplication(config, { logger: false, keyAgreement: false });
    try {
      const result = await bootstrap(app, { adminPassword: config.adminPassword, publicUrl: config.publicUrl });
      for (const change of result.changes) console.log(change);
      if (result.changes.length === 0) console.log('nothing to do: already bootstrapped');
      if (result.generatedAdminPassword) console.log(`Generated admin password (shown once): ${result.generatedAdminPassword}`);
    } finally {
      await app.close();
    }
  },
  async db_sync(config) {
    if (!config.databaseUrl) fs.mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
    const { embeddedDirectoryOf, Store } = await import('../store/database.ts');
    const store = await Store.open({ databaseUrl: config.databaseUrl, embeddedDirectory: embeddedDirectoryOf(config.dataDir) });
    try {
      const applied = await store.migrate();
      console.log(applied.length ? `applied ${applied.join(', ')}` : 'database is up to date');
    } finally {
      await store.close();
    }
  },
  async fernet_setup(config) {
    if (config.keyEncryptionKey) return databaseKeys(config, 'fernet', 'setup');
    const repository = new FernetKeyRepository(config.fernetKeyRepository, config.fernetMaxActiveKeys);
    if (repository.exists()) {
      console.log(`${config.fernetKeyRepository} already has keys; nothing to do`);
      return;
    }
    repository.setup();
    console.log(`created Fernet keys in ${config.fernetKeyRepository}`);
  },
  async fernet_rotate(config) {
    if (config.keyEncryptionKey) return databaseKeys(config, 'fernet', 'rotate');
    const repository = new FernetKeyRepository(config.fernetKeyRepository, config.fernetMaxActiveKeys);
    if (!repository.exists()) {
      throw new ConfigError(`${config.fernetKeyRepository} has no keys: run fernet_setup first`);
    }
    repository.rotate();
    console.log(`rotated Fernet keys in ${config.fernetKeyRepository}; running services pick them up without a restart`);
  },
  async jws_setup(config) {
    if (config.keyEncryptionKey) return databaseKeys(config, 'jws', 'setup');
    const { JwsKeyRepository } = await import('../token/jws-key-repository.ts');
    const repository = new JwsKeyRepository(config.jwsKeyRepository, config.jwsMaxActiveKeys);
    if (repository.exists()) {
      console.log(`${config.jwsKeyRepository} already has keys; nothing to do`);
      return;
    }
    await repository.setup();
    console.log(`created a JWS key pair in ${config.jwsKeyRepository}`);
  },
  async jws_rotate(config) {
    if (config.keyEncryptionKey) return databaseKeys(config, 'jws', 'rotate');
    const { JwsKeyRepository } = await import('../token/jws-key-repository.ts');
    const repository = new JwsKeyRepository(config.jwsKeyRepository, config.jwsMaxActiveKeys);
    if (!repository.exists()) throw new ConfigError(`${config.jwsKeyRepository} has no keys: run jws_setup first`);
    await repository.rotate();
    console.log(`rotated the JWS keys in ${config.jwsKeyRepository}; running services pick them up without a restart`);
  },
  async credential_setup(config) {
    if (config.keyEncryptionKey) return databaseKeys(config, 'credential', 'setup');
    const repository = credentialKeys(config);
    if (repository.exists()) {
      console.log(`${config.credentialKeyRepository} already has keys; nothing to do`);
      return;
    }
    repository.setup();
    console.log(`created credential keys in ${config.credentialKeyRepository}`);
  },
  async credential_rotate(config) {
    const repository = credentialKeys(config);
    if (!config.keyEncryptionKey && !repository.exists()) throw new ConfigError(`${config.credentialKeyRepository} has no keys: run credential_setup first`);
    await withCredentialKeys(config, async (maintenance) => {
      const { UnmigratedCredentialsError } = await import('../credential/credential-key-maintenance.ts');
      try {
        await maintenance.assertRotatable();
      } catch (error) {
        if (error instanceof UnmigratedCredentialsError) throw new ConfigError(error.message);
        throw error;
      }
    });
    if (config.keyEncryptionKey) return databaseKeys(config, 'credential', 'rotate');
    repository.rotate();
    console.log(`rotated the credential keys in ${config.credentialKeyRepository}; run credential_migrate to encrypt every credential with the new primary key`);
  },
  async credential_migrate(config) {
    if (!config.keyEncryptionKey && !credentialKeys(config).exists()) throw new ConfigError(`${config.credentialKeyRepository} has no keys: run credential_setup first`);
    const migrated = await withCredentialKeys(config, (maintenance) => maintenance.migrate());
    console.log(migrated > 0 ? `encrypted ${migrated} credentials with the primary credential key` : 'every credential is encrypted with the primary credential key; nothing to do');
  },
  async reencrypt_keys(config) {
    if (!config.keyEncryptionKey) throw new ConfigError('reencrypt_keys works on keys in the database: set KEY_ENCRYPTION_KEY (the new key) and KEY_ENCRYPTION_KEY_PREVIOUS (the old one)');
    if (!config.databaseUrl) fs.mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
    const { embeddedDirectoryOf, Store } = await import('../store/database.ts');
    const { DatabaseKeyStore } = await import('../token/database-key-store.ts');
    const store = await Store.open({ databaseUrl: config.databaseUrl, embeddedDirectory: embeddedDirectoryOf(config.dataDir), poolSize: 2 });
    try {
      await store.migrate();
      const keys = new DatabaseKeyStore(store, config.keyEncryptionKey, config.previousKeyEncryptionKeys);
      for (const provider of ['fernet', 'jws', 'credential'] as const) {
        const count = await keys.reencrypt(provider);
        if (count > 0) console.log(`re-encrypted ${count} ${provider} keys under KEY_ENCRYPTION_KEY`);
      }
      console.log('KEY_ENCRYPTION_KEY_PREVIOUS can now be removed from every node');
    } finally {
      await store.close();
    }
  },
  async forget_key_fingerprints(config) {
    if (!config.databaseUrl) fs.mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
    const { embeddedDirectoryOf, Store } = await import('../store/database.ts');
    const { KeyAgreement } = await import('../token/key-agreement.ts');
    const store = await Store.open({ databaseUrl: config.databaseUrl, embeddedDirectory: embeddedDirectoryOf(config.dataDir), poolSize: 2 });
    try {
      await store.migrate();
      const forgotten = await new KeyAgreement(store).forget();
      console.log(
        forgotten > 0
          ? `forgot the fingerprints of ${forgotten} key sets; the next node to start records its token keys and SECRET_PEPPER, and nodes that differ from it refuse to start`
          : 'no fingerprints recorded; nothing to do',
      );
    } finally {
      await store.close();
    }
  },
  async mapping_engine(_config, args) {
    const { mappingEngineCommand, mappingEngineFailure, MappingEngineUsageError, MAPPING_ENGINE_USAGE } = await import('./mapping-engine.ts');
    try {
      return mappingEngineCommand(args, (text) => process.stdout.write(text));
    } catch (error) {
      if (error instanceof MappingEngineUsageError) throw new UsageError(error.message, MAPPING_ENGINE_USAGE);
      const failure = mappingEngineFailure(error);
      if (failure) throw new ConfigError(failure);
      throw error;
    }
  },
  async saml_setup(config, args) {
    const { values } = parseArgs({ args, options: { days: { type: 'string', default: '3650' } }, strict: true });
    const days = Number(values.days);
    if (!/^\d+$/.test(values.days) || days < 1 || days > 36_500) throw new UsageError('--days must be a whole number of days (1 to 36500)', USAGE);
    const { samlSetup, SamlCommandError } = await import('./saml.ts');
    try {
      console.log(await samlSetup(config, { days }));
    } catch (error) {
      if (error instanceof SamlCommandError) throw new ConfigError(error.message);
      throw error;
    }
  },
  async saml_idp_metadata(config) {
    const { samlIdpMetadata, SamlCommandError } = await import('./saml.ts');
    try {
      console.log(samlIdpMetadata(config));
    } catch (error) {
      if (error instanceof SamlCommandError) throw new ConfigError(error.message);
      throw error;
    }
  },
  async policy(config, args) {
    const [subcommand, ...rest] = args;
    if (subcommand === 'test') return policyTest(config, rest);
    if (subcommand === 'explain') return policyExplain(config, rest);
    if (subcommand === 'replay') return (await import('./policy-replay.ts')).policyReplay(config, rest, (message) => new UsageError(message, POLICY_USAGE));
    if (subcommand === 'help' || subcommand === '--help' || subcommand === '-h') {
      process.stdout.write(POLICY_USAGE);
      return 0;
    }
    throw new UsageError(subcommand ? `unknown policy command '${subcommand}'` : 'missing policy command (test, explain or replay)', POLICY_USAGE);
  },
};

/**
 * fernet_setup/rotate and jws_setup/rotate on the database's keys (KEY_ENCRYPTION_KEY): one locked
 * transaction each, then a notice to the running nodes over Redis when REDIS_URL is set.
 */
async function databaseKeys(config: Config, provider: 'fernet' | 'jws' | 'credential', action: 'setup' | 'rotate'): Promise<void> {
  if (!config.databaseUrl) fs.mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  const { embeddedDirectoryOf, Store } = await import('../store/database.ts');
  const { DatabaseFernetKeys, DatabaseJwsKeys, DatabaseKeyStore, DatabaseKeyStoreError } = await import('../token/database-key-store.ts');
  const { JwsKeyRepository } = await import('../token/jws-key-repository.ts');
  const store = await Store.open({ databaseUrl: config.databaseUrl, embeddedDirectory: embeddedDirectoryOf(config.dataDir), poolSize: 2 });
  try {
    await store.migrate();
    const keys = new DatabaseKeyStore(store, config.keyEncryptionKey!, config.previousKeyEncryptionKeys);
    const options = { reloadIntervalMs: config.keyReloadIntervalMs };
    const source =
      provider === 'fernet'
        ? new DatabaseFernetKeys(keys, config.fernetMaxActiveKeys, { ...options, importFrom: new FernetKeyRepository(config.fernetKeyRepository, config.fernetMaxActiveKeys) })
        : provider === 'credential'
          ? new DatabaseFernetKeys(keys, CREDENTIAL_MAX_ACTIVE_KEYS, { ...options, importFrom: credentialKeys(config), provider })
          : new DatabaseJwsKeys(keys, config.jwsMaxActiveKeys, { ...options, importFrom: new JwsKeyRepository(config.jwsKeyRepository, config.jwsMaxActiveKeys) });
    if (action === 'setup') {
      const outcome = await source.setup();
      if (outcome === 'present') {
        // Decrypting proves KEY_ENCRYPTION_KEY is the one the keys were stored with.
        await source.load();
        console.log(`the database already has ${provider} keys; nothing to do`);
        return;
      }
      const files = provider === 'fernet' ? config.fernetKeyRepository : provider === 'credential' ? config.credentialKeyRepository : config.jwsKeyRepository;
      console.log(outcome === 'imported' ? `imported the ${provider} keys of ${files} into the database` : `created ${provider} keys in the database`);
    } else {
      if (!(await source.exists())) throw new ConfigError(`the database has no ${provider} keys: run ${provider}_setup first`);
      await source.rotate();
      console.log(`rotated the ${provider} keys in the database`);
    }
  } catch (error) {
    // Keys the operator must repair (no staged key, a malformed key): a message, not a stack.
    if (error instanceof DatabaseKeyStoreError) throw new ConfigError(error.message);
    throw error;
  } finally {
    await store.close();
  }
  if (!config.redisUrl) {
    console.log(`running services load them within KEY_RELOAD_INTERVAL_MS (${config.keyReloadIntervalMs} ms), without a restart`);
    return;
  }
  const { publishOnce } = await import('../events/event-bus.ts');
  if (await publishOnce(config.redisUrl, config.redisEventsChannel, { type: 'keys-changed' })) console.log('told the running services over Redis; they reload the keys now');
  else console.log(`could not reach Redis: running services load the keys within KEY_RELOAD_INTERVAL_MS (${config.keyReloadIntervalMs} ms)`);
}

function credentialKeys(config: Config): FernetKeyRepository {
  return new FernetKeyRepository(config.credentialKeyRepository, CREDENTIAL_MAX_ACTIVE_KEYS);
}

/** Runs `action` with the database and the credential keys (credential_rotate, credential_migrate). */
async function withCredentialKeys<T>(config: Config, action: (maintenance: CredentialKeyMaintenance) => Promise<T>): Promise<T> {
  if (!config.databaseUrl) fs.mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  const { embeddedDirectoryOf, Store } = await import('../store/database.ts');
  const { CredentialEncryption } = await import('../credential/credential-encryption.ts');
  const { CredentialKeyMaintenance } = await import('../credential/credential-key-maintenance.ts');
  const store = await Store.open({ databaseUrl: config.databaseUrl, embeddedDirectory: embeddedDirectoryOf(config.dataDir), poolSize: 2 });
  try {
    await store.migrate();
    let source: FernetKeySource = credentialKeys(config);
    if (config.keyEncryptionKey) {
      const { DatabaseFernetKeys, DatabaseKeyStore } = await import('../token/database-key-store.ts');
      const keys = new DatabaseKeyStore(store, config.keyEncryptionKey, config.previousKeyEncryptionKeys);
      source = new DatabaseFernetKeys(keys, CREDENTIAL_MAX_ACTIVE_KEYS, { reloadIntervalMs: config.keyReloadIntervalMs, provider: 'credential' });
      if (!(await source.exists())) throw new ConfigError('the database has no credential keys: run credential_setup first');
    }
    const encryption = new CredentialEncryption(source, { info: () => {}, error: () => {} }, Date.now);
    await encryption.reload();
    return await action(new CredentialKeyMaintenance(store, encryption));
  } finally {
    await store.close();
  }
}

/** `policy test [DIR]`: one line per failing fixture, then "N passed, M failed". */
async function policyTest(config: Config, args: string[]): Promise<number> {
  const { values, positionals } = parsePolicyArgs(args, { help: { type: 'boolean', short: 'h' } }, true);
  if (values.help) {
    process.stdout.write(POLICY_USAGE);
    return 0;
  }
  if (positionals.length > 1) throw new UsageError(`expected at most one directory, got ${positionals.length}`, POLICY_USAGE);
  const directory = positionals[0] ?? config.policyDirectory;
  const policy = await GatewayPolicy.load(directory);
  let { passed, failures } = await policy.runFixtures();
  // The identity API's rules: DIR/identity when a DIR is given, else IDENTITY_POLICY_DIR.
  const identityDirectory = positionals[0] ? path.join(directory, 'identity') : config.identityPolicyDirectory;
  if (fs.existsSync(path.join(identityDirectory, 'model.conf'))) {
    const identity = await (await IdentityPolicy.load(identityDirectory)).runFixtures();
    passed += identity.passed;
    failures = [...failures, ...identity.failures.map((failure) => `identity/${failure}`)];
  }
  for (const failure of failures) console.log(`FAIL ${failure.replace(/\s*\n\s*/g, ' ')}`);
  if (passed + failures.length === 0) console.log(`no fixtures in ${policy.directory}/tests`);
  console.log(`${passed} passed, ${failures.length} failed`);
  return failures.length === 0 ? 0 : 1;
}

const EXPLAIN_OPTIONS = {
  service: { type: 'string' },
  method: { type: 'string' },
  path: { type: 'string' },
  roles: { type: 'string' },
  scope: { type: 'string' },
  'project-id': { type: 'string' },
  'user-id': { type: 'string' },
  dir: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** `policy explain ...`: the decision, its deciding line and every matching line. */
async function policyExplain(config: Config, args: string[]): Promise<number> {
  const { values } = parsePolicyArgs(args, EXPLAIN_OPTIONS, false);
  if (values.help) {
    process.stdout.write(POLICY_USAGE);
    return 0;
  }
  const required = (name: 'service' | 'method' | 'path' | 'scope'): string => {
    const value = values[name];
    if (value === undefined || value === '') throw new UsageError(`--${name} is required`, POLICY_USAGE);
    return value;
  };
  const service = required('service');
  // Node hands the gateway upper-case methods; accept 'get' for convenience.
  const method = required('method').toUpperCase();
  const requestPath = required('path');
  if (!requestPath.startsWith('/')) throw new UsageError(`--path must start with '/' (the path after /${service})`, POLICY_USAGE);
  const scope = required('scope');
  if (!isPolicyScope(scope)) throw new UsageError(`--scope must be project, domain or system, not '${scope}'`, POLICY_USAGE);
  const projectId = values['project-id'];
  // The gateway passes a project id only for project-scoped tokens.
  if (projectId !== undefined && scope !== 'project') throw new UsageError('--project-id needs --scope project', POLICY_USAGE);
  const roles = (values.roles ?? '')
    .split(',')
    .map((role) => role.trim())
    .filter((role) => role !== '');
  const request: PolicyRequest = { service, roles, scope, userId: values['user-id'] ?? '', method, path: requestPath };
  if (projectId !== undefined) request.projectId = projectId;

  const policy = await GatewayPolicy.load(values.dir ?? config.policyDirectory);
  const explanation = policy.explain(request);
  if (values.json) {
    console.log(JSON.stringify({ request, ...explanation }, null, 2));
    return 0;
  }
  const owner = [projectId !== undefined ? `project ${projectId}` : '', request.userId ? `user ${request.userId}` : ''].filter(Boolean);
  console.log(`request: ${method} ${requestPath} on ${service}; roles ${roles.join(',') || '(none)'}; scope ${scope}${owner.map((part) => `; ${part}`).join('')}`);
  console.log(`decision: ${explanation.allowed ? 'allow' : 'deny'} (${explanation.reason})`);
  if (explanation.rule !== undefined) console.log(`deciding rule: ${explanation.rule}  (${explanation.source}:${explanation.line})`);
  else console.log('deciding rule: none');
  if (explanation.reason === 'unknown service') console.log(`known services: ${policy.services().join(', ') || '(none)'}`);
  console.log(`matching lines: ${explanation.matches.length}`);
  for (const match of explanation.matches) console.log(`  ${match.effect.padEnd(5)}  ${match.source}:${match.line}  ${match.rule}`);
  return 0;
}

function parsePolicyArgs<Options extends NonNullable<Parameters<typeof parseArgs>[0]>['options']>(
  args: string[],
  options: Options,
  allowPositionals: boolean,
) {
  try {
    return parseArgs({ args, options, allowPositionals, strict: true });
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error), POLICY_USAGE);
  }
}

function isPolicyScope(scope: string): scope is PolicyScope {
  return scope === 'project' || scope === 'domain' || scope === 'system';
}

async function run(argv: string[]): Promise<number> {
  const [name, ...args] = argv;
  const command = name ? commands[name] : undefined;
  if (!command) {
    process.stderr.write(name && name !== 'help' && name !== '--help' ? `unknown command '${name}'\n\n${USAGE}` : USAGE);
    return name && name !== 'help' && name !== '--help' ? 2 : 0;
  }
  try {
    return (await command(loadConfig(), args)) ?? 0;
  } catch (error) {
    if (error instanceof UsageError) {
      process.stderr.write(`manage ${name}: ${error.message}\n\n${error.usage}`);
      return 2;
    }
    const expected = error instanceof ConfigError || error instanceof PolicyLoadError ? error : await asDataDirectoryLocked(error);
    if (expected) {
      process.stderr.write(`manage ${name}: ${expected.message}\n`);
      return 1;
    }
    throw error;
  }
}

async function asDataDirectoryLocked(error: unknown): Promise<Error | undefined> {
  // Only the database commands raise it, and they have loaded the module already.
  const { DataDirectoryLockedError } = await import('../store/embedded.ts');
  return error instanceof DataDirectoryLockedError ? error : undefined;
}

process.exitCode = await run(process.argv.slice(2));
