import fs from 'node:fs';
import { pino } from 'pino';
import { buildApplication } from './app.ts';
import { bootstrap } from './bootstrap.ts';
import { ConfigError, loadConfig } from './config.ts';
import { DataDirectoryLockedError } from './store/embedded.ts';

const REDACT = ['req.headers["x-auth-token"]', 'req.headers["x-subject-token"]', 'req.headers.authorization', 'req.headers.cookie'];

async function main(): Promise<void> {
  const config = loadConfig();
  const log = pino({ level: config.logLevel, redact: { paths: REDACT, censor: '[redacted]' } });
  if (!config.databaseUrl) fs.mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  const app = await buildApplication(config, { logger: log });
  const result = await bootstrap(app, { adminPassword: config.adminPassword, publicUrl: config.publicUrl });
  for (const change of result.changes) log.info(`bootstrap: ${change}`);
  await app.server.listen({ port: config.port, host: config.host });
  const address = app.server.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  log.info(
    { database: app.store.kind === 'pglite' ? `${config.dataDir} (embedded PGlite)` : 'PostgreSQL', url: config.publicUrl },
    `keystone-gateway listening on http://${config.host}:${port}`,
  );
  const password = result.generatedAdminPassword ?? (config.adminPassword ? '$ADMIN_PASSWORD' : '<the admin password set earlier>');
  // Printed to stdout on purpose, once: the generated password is not kept anywhere else.
  process.stdout.write(
    [
      '',
      result.generatedAdminPassword ? `Generated admin password (shown once): ${result.generatedAdminPassword}` : '',
      'Log in as admin with the openstack CLI:',
      `  export OS_AUTH_URL=${config.publicUrl}/v3 OS_IDENTITY_API_VERSION=3`,
      `  export OS_USERNAME=admin OS_PASSWORD="${password}" OS_PROJECT_NAME=admin`,
      '  export OS_USER_DOMAIN_NAME=Default OS_PROJECT_DOMAIN_NAME=Default',
      '  openstack token issue',
      '',
    ]
      .filter((line, index) => index !== 1 || line)
      .join('\n') + '\n',
  );

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down: draining in-flight requests');
    app
      .close()
      .then(() => process.exit(0))
      .catch((error: unknown) => {
        log.error({ err: error }, 'shutdown failed');
        process.exit(1);
      });
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError || error instanceof DataDirectoryLockedError) {
    process.stderr.write(`keystone-gateway: ${error.message}\n`);
  } else {
    process.stderr.write(`keystone-gateway failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  }
  process.exit(1);
});
