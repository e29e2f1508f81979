import path from 'node:path';

/** Every setting the service reads from its environment, validated once at start. */
export interface Config {
  port: number;
  host: string;
  /** Base URL clients use; links, the WWW-Authenticate header and the bootstrap catalog use it. */
  publicUrl: string;
  /** True when PUBLIC_URL was given: links then ignore the request's Host header. */
  publicUrlFixed: boolean;
  databaseUrl: string | undefined;
  dataDir: string;
  redisUrl: string | undefined;
  adminPassword: string | undefined;
  tokenExpiration: number;
  fernetKeyRepository: string;
  fernetMaxActiveKeys: number;
  tokenProvider: 'fernet' | 'jws' | 'uuid';
  jwsKeyRepository: string;
  jwsMaxActiveKeys: number;
  passwordHashRounds: number;
  /** Key of the application-credential secret hashes; generated into DATA_DIR when unset. */
  secretPepper: string | undefined;
  logLevel: string;
  requestTimeoutMs: number;
  headersTimeoutMs: number;
  maxHeaderBytes: number;
  gatewayRegion: string;
  upstreamConnectTimeoutMs: number;
  upstreamResponseTimeoutMs: number;
  upstreamConnections: number;
  serviceTokenRoles: string[];
  gatewayServiceCatalogHeader: boolean;
  policyDirectory: string;
  bodyLimitBytes: number;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

type Environment = Record<string, string | undefined>;

function integer(env: Environment, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(`${name} must be a whole number, got '${raw}'`);
  const value = Number(raw);
  if (value < min || value > max) throw new ConfigError(`${name} must be between ${min} and ${max}, got ${value}`);
  return value;
}

function url(env: Environment, name: string, protocols: string[]): string | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(`${name} is not a valid URL: '${raw}'`);
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(`${name} must use ${protocols.join(' or ')}, got '${parsed.protocol}'`);
  }
  return raw;
}

function tokenProvider(env: Environment): Config['tokenProvider'] {
  const value = (env.TOKEN_PROVIDER || 'fernet').toLowerCase();
  if (value === 'fernet' || value === 'jws' || value === 'uuid') return value;
  if (value === 'pki' || value === 'pkiz') {
    throw new ConfigError(`TOKEN_PROVIDER=${value} was removed from Keystone (Ocata) and is not supported: use fernet (the default) or jws`);
  }
  throw new ConfigError(`TOKEN_PROVIDER must be fernet, jws or uuid, got '${value}'`);
}

function pepper(env: Environment): string | undefined {
  const value = env.SECRET_PEPPER;
  if (!value) return undefined;
  if (Buffer.byteLength(value) < 32) throw new ConfigError('SECRET_PEPPER must be at least 32 bytes (e.g. openssl rand -base64 48)');
  return value;
}

function booleanSetting(env: Environment, name: string, fallback: boolean): boolean {
  const value = env[name];
  if (value === undefined || value === '') return fallback;
  if (/^(1|true|yes|on)$/i.test(value)) return true;
  if (/^(0|false|no|off)$/i.test(value)) return false;
  throw new ConfigError(`${name} must be true or false, got '${value}'`);
}

/** The checkout the service runs from (policies/ lives there by default). */
const projectRoot = path.resolve(import.meta.dirname, '..');

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export function loadConfig(env: Environment = process.env): Config {
  const port = integer(env, 'PORT', 5000, 0, 65535);
  const host = env.HOST || '127.0.0.1';
  const given = url(env, 'PUBLIC_URL', ['http:', 'https:']);
  const reachableHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  const publicUrl = (given ?? `http://${reachableHost}:${port}`).replace(/\/+$/, '').replace(/\/v3$/, '');
  const dataDir = path.resolve(env.DATA_DIR || './data');
  const logLevel = env.LOG_LEVEL || 'info';
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`);
  const adminPassword = env.ADMIN_PASSWORD || undefined;
  return {
    port,
    host,
    publicUrl,
    publicUrlFixed: given !== undefined,
    databaseUrl: url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']),
    dataDir,
    redisUrl: url(env, 'REDIS_URL', ['redis:', 'rediss:']),
    adminPassword,
    tokenExpiration: integer(env, 'TOKEN_EXPIRATION', 3600, 60, 31_536_000),
    fernetKeyRepository: path.resolve(env.FERNET_KEY_REPOSITORY || path.join(dataDir, 'fernet-keys')),
    fernetMaxActiveKeys: integer(env, 'FERNET_MAX_ACTIVE_KEYS', 3, 1, 100),
    tokenProvider: tokenProvider(env),
    jwsKeyRepository: path.resolve(env.JWS_KEY_REPOSITORY || path.join(dataDir, 'jws-keys')),
    jwsMaxActiveKeys: integer(env, 'JWS_MAX_ACTIVE_KEYS', 3, 1, 100),
    passwordHashRounds: integer(env, 'PASSWORD_HASH_ROUNDS', 12, 4, 31),
    secretPepper: pepper(env),
    logLevel,
    requestTimeoutMs: integer(env, 'REQUEST_TIMEOUT_MS', 30_000, 1000, 600_000),
    headersTimeoutMs: integer(env, 'HEADERS_TIMEOUT_MS', 10_000, 500, 600_000),
    maxHeaderBytes: integer(env, 'MAX_HEADER_BYTES', 16_384, 1024, 1_048_576),
    gatewayRegion: env.GATEWAY_REGION || 'RegionOne',
    upstreamConnectTimeoutMs: integer(env, 'UPSTREAM_CONNECT_TIMEOUT_MS', 5_000, 100, 600_000),
    upstreamResponseTimeoutMs: integer(env, 'UPSTREAM_RESPONSE_TIMEOUT_MS', 60_000, 100, 3_600_000),
    upstreamConnections: integer(env, 'UPSTREAM_CONNECTIONS', 128, 1, 10_000),
    serviceTokenRoles: (env.SERVICE_TOKEN_ROLES || 'service').split(',').map((role) => role.trim()).filter(Boolean),
    gatewayServiceCatalogHeader: booleanSetting(env, 'GATEWAY_SERVICE_CATALOG_HEADER', false),
    policyDirectory: path.resolve(env.POLICY_DIR || path.join(projectRoot, 'policies')),
    bodyLimitBytes: integer(env, 'BODY_LIMIT_BYTES', 1_048_576, 1024, 104_857_600),
  };
}
