import fs from 'node:fs';
import { buildApplication } from '../app.ts';
import { bootstrap } from '../bootstrap.ts';
import { ConfigError, loadConfig, type Config } from '../config.ts';
import { embeddedDirectoryOf, Store } from '../store/database.ts';
import { DataDirectoryLockedError } from '../store/embedded.ts';
import { FernetKeyRepository } from '../token/fernet-key-repository.ts';
import { JwsKeyRepository } from '../token/jws-key-repository.ts';

const USAGE = `Usage: npm run manage -- <command>

Commands (configuration comes from the same environment variables as the service):
  bootstrap       create the Default domain, roles, admin user/project and identity endpoints
                  (idempotent; ADMIN_PASSWORD sets or resets the admin password)
  db_sync         apply database migrations
  fernet_setup    create the Fernet key repository (FERNET_KEY_REPOSITORY) if it has no keys
  fernet_rotate   rotate the Fernet keys, keeping FERNET_MAX_ACTIVE_KEYS
  jws_setup       create the JWS (ES256) key pair in JWS_KEY_REPOSITORY if there is none
  jws_rotate      add a new JWS key pair, keeping JWS_MAX_ACTIVE_KEYS public keys
`;

type Command = (config: Config) => Promise<void>;

const commands: Record<string, Command> = {
  async bootstrap(config) {
    if (!config.databaseUrl) fs.mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
    const app = await buildApplication(config, { logger: false });
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
    const store = await Store.open({ databaseUrl: config.databaseUrl, embeddedDirectory: embeddedDirectoryOf(config.dataDir) });
    try {
      const applied = await store.migrate();
      console.log(applied.length ? `applied ${applied.join(', ')}` : 'database is up to date');
    } finally {
      await store.close();
    }
  },
  async fernet_setup(config) {
    const repository = new FernetKeyRepository(config.fernetKeyRepository, config.fernetMaxActiveKeys);
    if (repository.exists()) {
      console.log(`${config.fernetKeyRepository} already has keys; nothing to do`);
      return;
    }
    repository.setup();
    console.log(`created Fernet keys in ${config.fernetKeyRepository}`);
  },
  async fernet_rotate(config) {
    const repository = new FernetKeyRepository(config.fernetKeyRepository, config.fernetMaxActiveKeys);
    if (!repository.exists()) {
      throw new ConfigError(`${config.fernetKeyRepository} has no keys: run fernet_setup first`);
    }
    repository.rotate();
    console.log(`rotated Fernet keys in ${config.fernetKeyRepository}; running services pick them up without a restart`);
  },
  async jws_setup(config) {
    const repository = new JwsKeyRepository(config.jwsKeyRepository, config.jwsMaxActiveKeys);
    if (repository.exists()) {
      console.log(`${config.jwsKeyRepository} already has keys; nothing to do`);
      return;
    }
    await repository.setup();
    console.log(`created a JWS key pair in ${config.jwsKeyRepository}`);
  },
  async jws_rotate(config) {
    const repository = new JwsKeyRepository(config.jwsKeyRepository, config.jwsMaxActiveKeys);
    if (!repository.exists()) throw new ConfigError(`${config.jwsKeyRepository} has no keys: run jws_setup first`);
    await repository.rotate();
    console.log(`rotated the JWS keys in ${config.jwsKeyRepository}; running services pick them up without a restart`);
  },
};

async function run(argv: string[]): Promise<number> {
  const [name] = argv;
  const command = name ? commands[name] : undefined;
  if (!command) {
    process.stderr.write(name && name !== 'help' && name !== '--help' ? `unknown command '${name}'\n\n${USAGE}` : USAGE);
    return name && name !== 'help' && name !== '--help' ? 2 : 0;
  }
  try {
    await command(loadConfig());
    return 0;
  } catch (error) {
    if (error instanceof ConfigError || error instanceof DataDirectoryLockedError) {
      process.stderr.write(`manage ${name}: ${error.message}\n`);
      return 1;
    }
    throw error;
  }
}

process.exitCode = await run(process.argv.slice(2));
