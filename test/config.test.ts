import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { ConfigError, loadConfig } from '../src/config.ts';

t.test('defaults', async (t) => {
  const config = loadConfig({});
  t.match(config, {
    port: 5000,
    host: '127.0.0.1',
    publicUrl: 'http://127.0.0.1:5000',
    publicUrlFixed: false,
    databaseUrl: undefined,
    redisUrl: undefined,
    tokenExpiration: 3600,
    fernetMaxActiveKeys: 3,
    passwordHashRounds: 12,
    logLevel: 'info',
  });
  t.equal(config.dataDir, path.resolve('data'));
  t.equal(config.fernetKeyRepository, path.resolve('data', 'fernet-keys'));
  t.ok(config.requestTimeoutMs > 0, 'request timeout is never "no limit"');
  t.ok(config.headersTimeoutMs > 0, 'headers timeout is never "no limit"');
  t.match(config, {
    maxHeaderBytes: 16_384,
    gatewayRegion: 'RegionOne',
    upstreamConnectTimeoutMs: 5_000,
    upstreamResponseTimeoutMs: 60_000,
    serviceTokenRoles: ['service'],
    gatewayServiceCatalogHeader: false,
  });
  t.equal(config.policyDirectory, path.resolve(import.meta.dirname, '..', 'policies'), 'the checkout policies by default, wherever the service starts');
  t.equal(config.identityPolicyDirectory, path.resolve(import.meta.dirname, '..', 'policies', 'identity'));
});

t.test('gateway settings from the environment', async (t) => {
  const config = loadConfig({
    GATEWAY_REGION: 'RegionTwo',
    SERVICE_TOKEN_ROLES: 'service, nova-service,',
    GATEWAY_SERVICE_CATALOG_HEADER: 'yes',
    POLICY_DIR: '/etc/kg/policies',
    MAX_HEADER_BYTES: '32768',
  });
  t.match(config, { gatewayRegion: 'RegionTwo', serviceTokenRoles: ['service', 'nova-service'], gatewayServiceCatalogHeader: true, policyDirectory: '/etc/kg/policies', maxHeaderBytes: 32_768 });
  t.equal(loadConfig({ GATEWAY_SERVICE_CATALOG_HEADER: 'off' }).gatewayServiceCatalogHeader, false);
  t.equal(loadConfig({}).gatewayPublicCatalog, true, 'clients are sent through the gateway unless told otherwise');
  t.equal(loadConfig({ GATEWAY_PUBLIC_CATALOG: 'false' }).gatewayPublicCatalog, false);
});

t.test('values from the environment', async (t) => {
  const config = loadConfig({
    PORT: '8080',
    HOST: '0.0.0.0',
    PUBLIC_URL: 'https://id.example.net/v3/',
    DATABASE_URL: 'postgres://u@db/k',
    DATA_DIR: '/var/lib/kg',
    TOKEN_EXPIRATION: '600',
    FERNET_MAX_ACTIVE_KEYS: '5',
  });
  t.equal(config.publicUrl, 'https://id.example.net', 'a trailing /v3 is dropped');
  t.equal(config.publicUrlFixed, true);
  t.equal(config.fernetKeyRepository, '/var/lib/kg/fernet-keys');
  t.equal(config.tokenExpiration, 600);
  t.equal(loadConfig({ HOST: '0.0.0.0', PORT: '7000' }).publicUrl, 'http://127.0.0.1:7000');
});

t.test('bad values stop the start with the variable named', async (t) => {
  const cases: Record<string, string>[] = [
    { PORT: 'eighty' },
    { PORT: '70000' },
    { DATABASE_URL: 'mysql://x' },
    { PUBLIC_URL: 'not a url' },
    { REDIS_URL: 'http://redis' },
    { TOKEN_EXPIRATION: '-5' },
    { FERNET_MAX_ACTIVE_KEYS: '0' },
    { LOG_LEVEL: 'loud' },
    { GATEWAY_SERVICE_CATALOG_HEADER: 'maybe' },
    { GATEWAY_PUBLIC_CATALOG: 'sometimes' },
    { MAX_HEADER_BYTES: '10' },
    { UPSTREAM_RESPONSE_TIMEOUT_MS: '0' },
  ];
  for (const environment of cases) {
    const name = Object.keys(environment)[0]!;
    t.throws(() => loadConfig(environment), { name: 'ConfigError', message: new RegExp(name) }, name);
  }
  t.ok(new ConfigError('x') instanceof Error);
});

t.test('security compliance, rate limits and audit settings', async (t) => {
  const defaults = loadConfig({});
  t.same(
    { ...defaults.securityCompliance },
    {
      passwordRegex: undefined,
      passwordRegexDescription: undefined,
      passwordExpiresDays: undefined,
      lockoutFailureAttempts: undefined,
      lockoutDurationSeconds: 1800,
      disableUserAccountDaysInactive: undefined,
      uniqueLastPasswordCount: 0,
      minimumPasswordAgeDays: 0,
      changePasswordUponFirstUse: false,
    },
    "Keystone's defaults: every rule off",
  );
  t.same(defaults.authRateLimit, { perAddress: 300, perUser: 10, windowSeconds: 60 });
  t.same(defaults.trustedProxies, []);
  t.equal(defaults.rateLimitKeyPrefix, 'keystone-gateway:ratelimit:');
  t.equal(defaults.auditStream, 'keystone-gateway:audit');
  t.equal(defaults.auditStreamMaxLength, 100_000);

  const config = loadConfig({
    IDENTITY_PASSWORD_REGEX: '^(?=.*\\d)(?=.*[a-zA-Z]).{7,}$',
    IDENTITY_PASSWORD_REGEX_DESCRIPTION: 'seven or more, a letter and a digit',
    IDENTITY_PASSWORD_EXPIRES_DAYS: '90',
    IDENTITY_LOCKOUT_FAILURE_ATTEMPTS: '6',
    IDENTITY_LOCKOUT_DURATION: '900',
    IDENTITY_DISABLE_USER_ACCOUNT_DAYS_INACTIVE: '60',
    IDENTITY_UNIQUE_LAST_PASSWORD_COUNT: '5',
    IDENTITY_MINIMUM_PASSWORD_AGE: '1',
    IDENTITY_CHANGE_PASSWORD_UPON_FIRST_USE: 'true',
    AUTH_RATE_LIMIT_PER_ADDRESS: '0',
    AUTH_RATE_LIMIT_PER_USER: '5',
    AUTH_RATE_LIMIT_WINDOW: '300',
    TRUSTED_PROXIES: '10.0.0.0/8, 192.0.2.1, fd00::/8',
  });
  t.match(config.securityCompliance, {
    passwordRegexDescription: 'seven or more, a letter and a digit',
    passwordExpiresDays: 90,
    lockoutFailureAttempts: 6,
    lockoutDurationSeconds: 900,
    disableUserAccountDaysInactive: 60,
    uniqueLastPasswordCount: 5,
    minimumPasswordAgeDays: 1,
    changePasswordUponFirstUse: true,
  });
  const regex = config.securityCompliance.passwordRegex!;
  t.ok(regex.test('abcdef1'));
  t.notOk(regex.test('abcdefg'));
  t.ok(loadConfig({ IDENTITY_PASSWORD_REGEX: 'a' }).securityCompliance.passwordRegex!.test('abc'), 'anchored at the start only, like re.match');
  t.notOk(loadConfig({ IDENTITY_PASSWORD_REGEX: 'a' }).securityCompliance.passwordRegex!.test('bac'));
  t.ok(loadConfig({ IDENTITY_PASSWORD_REGEX: '.{3}$' }).securityCompliance.passwordRegex!.test('😀😀😀'), 'characters, not UTF-16 units, as in Python');
  t.same(config.authRateLimit, { perAddress: 0, perUser: 5, windowSeconds: 300 });
  t.same(config.trustedProxies, ['10.0.0.0/8', '192.0.2.1', 'fd00::/8']);

  const bad: Record<string, string>[] = [
    { IDENTITY_PASSWORD_REGEX: '(unclosed' },
    { IDENTITY_PASSWORD_EXPIRES_DAYS: '0' },
    { IDENTITY_LOCKOUT_FAILURE_ATTEMPTS: '0' },
    { IDENTITY_LOCKOUT_DURATION: '0' },
    { IDENTITY_DISABLE_USER_ACCOUNT_DAYS_INACTIVE: 'soon' },
    { IDENTITY_UNIQUE_LAST_PASSWORD_COUNT: '-1' },
    { IDENTITY_MINIMUM_PASSWORD_AGE: '1.5' },
    { IDENTITY_CHANGE_PASSWORD_UPON_FIRST_USE: 'sometimes' },
    { AUTH_RATE_LIMIT_PER_ADDRESS: 'many' },
    { AUTH_RATE_LIMIT_WINDOW: '0' },
    { TRUSTED_PROXIES: 'proxy.example.net' },
    { TRUSTED_PROXIES: '10.0.0.0/33' },
    { AUDIT_STREAM_MAX_LENGTH: '0' },
  ];
  for (const environment of bad) {
    const name = Object.keys(environment)[0]!;
    t.throws(() => loadConfig(environment), { name: 'ConfigError', message: new RegExp(name) }, `${name}=${environment[name]}`);
  }
});

t.test('workers and shutdown', async (t) => {
  const defaults = loadConfig({});
  t.equal(defaults.workers, os.availableParallelism(), 'one worker per core by default');
  t.equal(defaults.workersGiven, false);
  t.equal(defaults.shutdownTimeoutMs, 25_000);
  t.match(loadConfig({ WORKERS: '1', SHUTDOWN_TIMEOUT_MS: '5000' }), { workers: 1, workersGiven: true, shutdownTimeoutMs: 5000 });
  t.match(loadConfig({ WORKERS: '' }), { workers: os.availableParallelism(), workersGiven: false }, 'empty is unset');

  for (const environment of [{ WORKERS: '0' }, { WORKERS: 'auto' }, { WORKERS: '2000' }, { SHUTDOWN_TIMEOUT_MS: '-1' }, { SHUTDOWN_TIMEOUT_MS: '50' }]) {
    const name = Object.keys(environment)[0]!;
    t.throws(() => loadConfig(environment), { name: 'ConfigError', message: new RegExp(name) }, `${name}=${Object.values(environment)[0]}`);
  }
});

t.test('list page size and worker heap limits', async (t) => {
  const defaults = loadConfig({});
  // A page's rows die young (in the young generation) at 200; at 1,000 they outlived two scavenges
  // and the old generation grew ~25 MB more while streaming a 100k-user list (bench/README.md).
  t.equal(defaults.listPageSize, 200, 'long lists are read 200 rows at a time');
  t.same(defaults.workerHeap, { maxOldSpaceMb: 0, maxSemiSpaceMb: 0 });
  t.equal(loadConfig({ LIST_PAGE_SIZE: '50' }).listPageSize, 50);
  t.same(loadConfig({ WORKER_MAX_OLD_SPACE_MB: '160', WORKER_MAX_SEMI_SPACE_MB: '16' }).workerHeap, { maxOldSpaceMb: 160, maxSemiSpaceMb: 16 });
  for (const environment of [{ LIST_PAGE_SIZE: '0' }, { LIST_PAGE_SIZE: 'all' }, { WORKER_MAX_OLD_SPACE_MB: '-1' }, { WORKER_MAX_SEMI_SPACE_MB: '2048' }]) {
    const name = Object.keys(environment)[0]!;
    t.throws(() => loadConfig(environment), { name: 'ConfigError', message: new RegExp(name) }, `${name}=${Object.values(environment)[0]}`);
  }
});

t.test('KEY_ENCRYPTION_KEY: 32 bytes in base64 or base64url, never echoed when wrong', async (t) => {
  const defaults = loadConfig({});
  t.equal(defaults.keyEncryptionKey, undefined, 'unset: keys stay in files');
  t.equal(defaults.keyReloadIntervalMs, 5000);
  const key = Buffer.from(Array.from({ length: 32 }, (_, index) => 250 - index));
  for (const text of [key.toString('base64'), key.toString('base64url'), `${key.toString('base64')}\n`]) {
    t.same(loadConfig({ KEY_ENCRYPTION_KEY: text }).keyEncryptionKey, key, JSON.stringify(text));
  }
  t.equal(loadConfig({ KEY_ENCRYPTION_KEY: '' }).keyEncryptionKey, undefined);
  for (const bad of [key.subarray(0, 31).toString('base64'), Buffer.concat([key, key]).toString('base64'), 'not base64 at all!', key.toString('hex')]) {
    const error = t.throws(() => loadConfig({ KEY_ENCRYPTION_KEY: bad }), ConfigError) as Error;
    t.match(error.message, /^KEY_ENCRYPTION_KEY must be 32 bytes/);
    t.notMatch(error.message, bad);
  }
  t.equal(loadConfig({ KEY_RELOAD_INTERVAL_MS: '250' }).keyReloadIntervalMs, 250);
  t.throws(() => loadConfig({ KEY_RELOAD_INTERVAL_MS: '0' }), { name: 'ConfigError', message: /KEY_RELOAD_INTERVAL_MS/ });
});

t.test('KEY_ENCRYPTION_KEY_PREVIOUS: earlier keys, comma-separated, only beside KEY_ENCRYPTION_KEY', async (t) => {
  const current = Buffer.alloc(32, 1).toString('base64');
  const [older, oldest] = [Buffer.alloc(32, 2), Buffer.alloc(32, 3)];
  t.same(loadConfig({}).previousKeyEncryptionKeys, []);
  t.same(loadConfig({ KEY_ENCRYPTION_KEY: current, KEY_ENCRYPTION_KEY_PREVIOUS: `${older.toString('base64')}, ${oldest.toString('base64url')}` }).previousKeyEncryptionKeys, [older, oldest]);
  t.throws(() => loadConfig({ KEY_ENCRYPTION_KEY_PREVIOUS: older.toString('base64') }), { name: 'ConfigError', message: /KEY_ENCRYPTION_KEY_PREVIOUS needs KEY_ENCRYPTION_KEY/ });
  const error = t.throws(() => loadConfig({ KEY_ENCRYPTION_KEY: current, KEY_ENCRYPTION_KEY_PREVIOUS: 'short' }), ConfigError) as Error;
  t.match(error.message, /^KEY_ENCRYPTION_KEY_PREVIOUS must be 32 bytes/);
  t.notMatch(error.message, 'short');
});

t.test('upstream circuits and metrics access', async (t) => {
  const defaults = loadConfig({});
  t.equal(defaults.upstreamCircuitFailures, 5);
  t.equal(defaults.upstreamCircuitOpenMs, 10_000);
  t.same(defaults.metricsAllowedNetworks, ['127.0.0.0/8', '::1'], 'loopback only by default');
  t.match(loadConfig({ UPSTREAM_CIRCUIT_FAILURES: '0', UPSTREAM_CIRCUIT_OPEN_MS: '2500' }), { upstreamCircuitFailures: 0, upstreamCircuitOpenMs: 2500 });
  t.same(loadConfig({ METRICS_ALLOWED_NETWORKS: '10.0.0.0/8, fd00::/8' }).metricsAllowedNetworks, ['10.0.0.0/8', 'fd00::/8']);
  t.same(loadConfig({ METRICS_ALLOWED_NETWORKS: '' }).metricsAllowedNetworks, [], 'set but empty: no /metrics');
  for (const environment of [{ UPSTREAM_CIRCUIT_FAILURES: '-1' }, { UPSTREAM_CIRCUIT_OPEN_MS: '10' }, { METRICS_ALLOWED_NETWORKS: 'prometheus.internal' }, { METRICS_ALLOWED_NETWORKS: '::1/129' }]) {
    const name = Object.keys(environment)[0]!;
    t.throws(() => loadConfig(environment), { name: 'ConfigError', message: new RegExp(name) }, `${name}=${Object.values(environment)[0]}`);
  }
});

t.test('database bounds and revocation polling', async (t) => {
  const defaults = loadConfig({});
  t.same(defaults.database, { connectTimeoutMs: 3000, acquireTimeoutMs: 5000, queryTimeoutMs: 5000, poolSize: 10 });
  t.equal(defaults.revocationPollIntervalMs, 2000);
  t.match(
    loadConfig({ DATABASE_CONNECT_TIMEOUT_MS: '1000', DATABASE_ACQUIRE_TIMEOUT_MS: '1500', DATABASE_QUERY_TIMEOUT_MS: '0', DATABASE_POOL_SIZE: '3', REVOCATION_POLL_INTERVAL_MS: '0' }),
    { database: { connectTimeoutMs: 1000, acquireTimeoutMs: 1500, queryTimeoutMs: 0, poolSize: 3 }, revocationPollIntervalMs: 0 },
  );
  for (const environment of [{ DATABASE_CONNECT_TIMEOUT_MS: '0' }, { DATABASE_ACQUIRE_TIMEOUT_MS: 'soon' }, { DATABASE_QUERY_TIMEOUT_MS: '-5' }, { DATABASE_POOL_SIZE: '0' }, { REVOCATION_POLL_INTERVAL_MS: '1.5' }]) {
    const name = Object.keys(environment)[0]!;
    t.throws(() => loadConfig(environment), { name: 'ConfigError', message: new RegExp(name) }, `${name}=${Object.values(environment)[0]}`);
  }
});

t.test('DOMAIN_CONFIG_DIR: unset is none; a path is resolved', async (t) => {
  t.equal(loadConfig({}).domainConfigDirectory, undefined);
  t.equal(loadConfig({ DOMAIN_CONFIG_DIR: '' }).domainConfigDirectory, undefined);
  t.equal(loadConfig({ DOMAIN_CONFIG_DIR: 'etc/domains' }).domainConfigDirectory, path.resolve('etc/domains'));
});

t.test('SAML service provider settings (SAML_PROTOCOLS, SAML_TRUSTED_IDP_METADATA, …)', async (t) => {
  t.strictSame(loadConfig({}).samlSp, {
    protocols: ['saml2'],
    trustedIdpMetadata: [],
    metadataRefreshSeconds: 3600,
    metadataHttpTimeoutMs: 5000,
    clockSkewSeconds: 60,
    entityId: undefined,
    acceptedRecipients: [],
    signatureAlgorithms: ['rsa-sha256', 'rsa-sha512', 'rsa-sha1'],
    remoteIdAttribute: 'Shib-Identity-Provider',
    replayKeyPrefix: 'keystone-gateway:saml-replay:',
  });
  const given = loadConfig({
    SAML_PROTOCOLS: 'saml2, k2k',
    SAML_TRUSTED_IDP_METADATA: 'idp.xml, https://idp.example.org/metadata',
    SAML_CLOCK_SKEW_SECONDS: '5',
    SAML_SP_ENTITY_ID: 'https://sp.example.org',
    SAML_SP_ACCEPTED_RECIPIENTS: 'https://sp.example.org/Shibboleth.sso/SAML2/ECP',
    SAML_SIGNATURE_ALGORITHMS: 'RSA-SHA256',
    SAML_REMOTE_ID_ATTRIBUTE: '',
  }).samlSp;
  t.match(given, {
    protocols: ['saml2', 'k2k'],
    trustedIdpMetadata: [path.resolve('idp.xml'), 'https://idp.example.org/metadata'],
    clockSkewSeconds: 5,
    entityId: 'https://sp.example.org',
    acceptedRecipients: ['https://sp.example.org/Shibboleth.sso/SAML2/ECP'],
    signatureAlgorithms: ['rsa-sha256'],
    remoteIdAttribute: '',
  });
  t.throws(() => loadConfig({ SAML_PROTOCOLS: 'openid' }), { name: 'ConfigError', message: /SAML_PROTOCOLS and OIDC_PROTOCOLS both name openid/ });
  t.throws(() => loadConfig({ SAML_PROTOCOLS: 'saml 2' }), { name: 'ConfigError', message: /SAML_PROTOCOLS/ });
  t.throws(() => loadConfig({ SAML_TRUSTED_IDP_METADATA: 'ftp://idp/metadata' }), { name: 'ConfigError', message: /SAML_TRUSTED_IDP_METADATA/ });
  t.throws(() => loadConfig({ SAML_SP_ACCEPTED_RECIPIENTS: 'not a url' }), { name: 'ConfigError', message: /SAML_SP_ACCEPTED_RECIPIENTS/ });
  t.throws(() => loadConfig({ SAML_SIGNATURE_ALGORITHMS: 'hmac-sha1' }), { name: 'ConfigError', message: /SAML_SIGNATURE_ALGORITHMS/ });
  t.throws(() => loadConfig({ SAML_CLOCK_SKEW_SECONDS: '3600' }), { name: 'ConfigError', message: /SAML_CLOCK_SKEW_SECONDS/ });
});
