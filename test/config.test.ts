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
    { MAX_HEADER_BYTES: '10' },
    { UPSTREAM_RESPONSE_TIMEOUT_MS: '0' },
  ];
  for (const environment of cases) {
    const name = Object.keys(environment)[0]!;
    t.throws(() => loadConfig(environment), { name: 'ConfigError', message: new RegExp(name) }, name);
  }
  t.ok(new ConfigError('x') instanceof Error);
});
