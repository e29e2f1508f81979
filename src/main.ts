import cluster from 'node:cluster';
import fs from 'node:fs';
import { pino, type Logger } from 'pino';
import { buildApplication, type Application } from './app.ts';
import { bootstrap, type BootstrapResult } from './cli/bootstrap.ts';
import { WorkerEventBus, WorkerSupervisor, workerHeapFlags } from './cluster.ts';
import { WorkerDecisionPeers } from './gateway/worker-decision-peers.ts';
import { ConfigError, loadConfig, type Config } from './config.ts';
import { DataDirectoryLockedError } from './store/embedded.ts';

const REDACT = ['req.headers["x-auth-token"]', 'req.headers["x-subject-token"]', 'req.headers.authorization', 'req.headers.cookie'];

/** After the drain deadline has cut the remaining connections, how long close() may still take. */
const EXIT_DEADLINE_MS = 5000;

async function main(): Promise<void> {
  const config = loadConfig();
  const log = pino({ level: config.logLevel, redact: { paths: REDACT, censor: '[redacted]' } });
  if (cluster.isWorker) return runWorker(config, log);
  if (config.workers > 1 && !config.databaseUrl) {
    // PGlite is one connection, and its directory is locked by the process that opened it.
    const setting = config.workersGiven ? `WORKERS=${config.workers}` : `WORKERS (default ${config.workers}, one per core)`;
    log[config.workersGiven ? 'warn' : 'info'](`${setting} ignored: the embedded database runs in one process; set DATABASE_URL (PostgreSQL) to run workers`);
  }
  if (config.workers > 1 && config.databaseUrl) return runPrimary(config, log);
  return runSingleProcess(config, log);
}

/** WORKERS=1, or the embedded database: one process does everything. */
async function runSingleProcess(config: Config, log: Logger): Promise<void> {
  if (!config.databaseUrl) fs.mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  const app = await buildApplication(config, { logger: log });
  const result = await runBootstrap(app, config, log);
  await app.server.listen({ port: config.port, host: config.host });
  const address = app.server.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  log.info(
    { database: app.store.kind === 'pglite' ? `${config.dataDir} (embedded PGlite)` : 'PostgreSQL', url: config.publicUrl },
    `keystone-gateway listening on http://${config.host}:${port}`,
  );
  printLoginHint(config, result);
  stopOnSignals(log, () => drain(app, config, log));
}

/**
 * The cluster primary: migrations, key repositories, the pepper file and bootstrap happen here, once,
 * before any worker exists (so workers never race on them); then it only supervises the workers.
 */
async function runPrimary(config: Config, log: Logger): Promise<void> {
  const app = await buildApplication(config, { logger: log });
  let result: BootstrapResult;
  try {
    result = await runBootstrap(app, config, log);
  } finally {
    await app.close();
  }
  const workerExecArgv = workerHeapFlags(config.workerHeap);
  const supervisor = new WorkerSupervisor({ workers: config.workers, shutdownTimeoutMs: config.shutdownTimeoutMs, log, workerExecArgv });
  stopOnSignals(log, () => supervisor.stop());
  const port = await supervisor.start();
  log.info({ database: 'PostgreSQL', url: config.publicUrl, workers: config.workers, workerNodeFlags: workerExecArgv }, `keystone-gateway listening on http://${config.host}:${port}`);
  printLoginHint(config, result);
}

/** A cluster worker: the primary has migrated and bootstrapped; serve until told to stop. */
async function runWorker(config: Config, log: Logger): Promise<void> {
  const app = await buildApplication(config, {
    logger: log,
    migrate: false,
    // Without Redis, siblings hear of each other's changes, and answer each other's decision
    // lookups, through the primary.
    ...(config.redisUrl ? {} : { eventBus: new WorkerEventBus(), ...(config.gatewayDecisions.kept > 0 ? { decisionPeers: new WorkerDecisionPeers() } : {}) }),
  });
  await app.server.listen({ port: config.port, host: config.host });
  stopOnSignals(log, () => drain(app, config, log));
}

async function runBootstrap(app: Application, config: Config, log: Logger): Promise<BootstrapResult> {
  const result = await bootstrap(app, { adminPassword: config.adminPassword, publicUrl: config.publicUrl });
  for (const change of result.changes) log.info(`bootstrap: ${change}`);
  return result;
}

function printLoginHint(config: Config, result: BootstrapResult): void {
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
}

/**
 * Stops accepting, lets in-flight requests finish, releases the database; the exit status. Requests
 * still running after SHUTDOWN_TIMEOUT_MS lose their connections.
 */
async function drain(app: Application, config: Config, log: Logger): Promise<number> {
  const cutConnections = setTimeout(() => {
    log.warn({ timeoutMs: config.shutdownTimeoutMs }, 'in-flight requests did not finish in time: closing their connections');
    app.closeAllConnections();
  }, config.shutdownTimeoutMs);
  // Something that hangs even then (an upstream that never answers) must not keep the process.
  const giveUp = setTimeout(() => {
    log.error('shutdown did not complete in time; exiting');
    process.exit(1);
  }, config.shutdownTimeoutMs + EXIT_DEADLINE_MS);
  try {
    await app.close();
    return 0;
  } catch (error) {
    log.error({ err: error }, 'shutdown failed');
    return 1;
  } finally {
    clearTimeout(cutConnections);
    clearTimeout(giveUp);
  }
}

function stopOnSignals(log: Logger, stop: () => Promise<number>): void {
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down: draining in-flight requests');
    void stop().then((code) => process.exit(code));
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError || error instanceof DataDirectoryLockedError) {
    process.stderr.write(`keystone-gateway: ${error.message}\n`);
  } else {
    process.stderr.write(`keystone-gateway failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  }
  process.exit(1);
});
