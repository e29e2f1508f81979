import path from 'node:path';
import http from 'node:http';
import type { Duplex } from 'node:stream';
import Fastify, { type FastifyBaseLogger } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Logger } from 'pino';
import { AssignmentService } from './assignment/assignment-service.ts';
import { LimitService } from './limit/limit-service.ts';
import { CatalogService } from './catalog/catalog-service.ts';
import { PolicyStoreService } from './policy-store/policy-store-service.ts';
import { FederationService } from './federation/federation-service.ts';
import { FederatedLogin } from './federation/federated-login.ts';
import { OidcAssertionVerifier } from './federation/oidc/oidc-verifier.ts';
import { OidcProviderDirectory } from './federation/oidc/provider-directory.ts';
import { OidcWebSso } from './federation/oidc/websso.ts';
import { WebSsoStateSealer } from './federation/oidc/websso-state.ts';
import type { AssertionVerifier } from './federation/assertion.ts';
import { SamlIdentityProvider } from './federation/saml/saml-idp.ts';
import { MemoryReplayCache, RedisReplayCache } from './federation/replay-cache.ts';
import { SamlAssertionVerifier } from './federation/saml/sp/saml-verifier.ts';
import { TrustedIdpMetadata } from './federation/saml/sp/trusted-metadata.ts';
import { SamlWebSso } from './federation/saml/sp/saml-websso.ts';
import { SamlEcpSessions } from './federation/saml/sp/ecp-session.ts';
import { loadSigningKeys } from './federation/saml/signing-keys.ts';
import { DomainConfigService } from './domain-config/domain-config-service.ts';
import { CREDENTIAL_MAX_ACTIVE_KEYS, CredentialEncryption } from './credential/credential-encryption.ts';
import { CredentialService } from './credential/credential-service.ts';
import { EndpointFilterService } from './catalog/endpoint-filter-service.ts';
import { systemClock, type Clock } from './support/clock.ts';
import type { Config } from './config.ts';
import { Redis } from 'ioredis';
import { AuditTrail, LogAuditSink, RedisStreamAuditSink, type AuditSink } from './events/audit.ts';
import { AccessEpoch } from './events/access-epoch.ts';
import { CACHE_TOPICS } from './events/change-topics.ts';
import { ClusterSync } from './events/cluster-sync.ts';
import { LocalEventBus, RedisEventBus, type EventBus } from './events/event-bus.ts';
import { Revocations } from './events/revocation.ts';
import type { App, IdentityApi } from './http/context.ts';
import { Gateway } from './gateway/gateway.ts';
import { InternalEndpoints } from './catalog/internal-endpoints.ts';
import { GatewayCatalog } from './catalog/client-catalog.ts';
import { clientAddressResolver } from './http/client-address.ts';
import { handleFrameworkError } from './http/errors.ts';
import { errorEnvelope } from './support/errors.ts';
import { restoreFastPrimitivePrototypes } from './support/primitive-prototypes.ts';
import { answerExpectationFailed, markExpectsContinue, onlyContinueExpected } from './http/expect.ts';
import { IDENTITY_MOUNT, MOUNT_PREFIX } from './http/links.ts';
import type { GatewayPolicy } from './policy/gateway-policy.ts';
import { PolicyReloader } from './policy/policy-reloader.ts';
import { ShadowPolicy } from './policy/shadow-policy.ts';
import { RedisDecisionPeers, type DecisionPeers } from './gateway/decision-peers.ts';
import { DecisionStore } from './gateway/decision-store.ts';
import { ServiceMetrics } from './metrics/service-metrics.ts';
import { registerIdentityApi, type RouteInfo } from './http/identity-api.ts';
import { SchemaCompilers } from './http/schema-compilers.ts';
import { StalledConnections } from './http/stalled-connections.ts';
import { RequestFront } from './http/front/request-front.ts';
import { IdentityService } from './identity/identity-service.ts';
import { IdentityRepository } from './identity/identity-repository.ts';
import type { DomainIdentityConfigSource } from './identity/domain-identity-config.ts';
import { IdMappings } from './identity/id-mapping.ts';
import { ldapDriver } from './identity/ldap/ldap-identity-backend.ts';
import { SqlIdentityBackend } from './identity/sql-identity-backend.ts';
import { ApplicationCredentialService } from './identity/application-credential-service.ts';
import { TrustService } from './trust/trust-service.ts';
import { PasswordHasher } from './identity/password-hash.ts';
import { loadPepper, SecretHasher } from './identity/secret-hash.ts';
import { OAuth1Service } from './oauth1/oauth1-service.ts';
import { SecretBox } from './oauth1/secret-box.ts';
import { PolicyIdentityAuthorizer } from './policy/identity-authorizer.ts';
import { IdentityPolicy } from './policy/identity-policy.ts';
import { ResourceService } from './resource/resource-service.ts';
import { embeddedDirectoryOf, Store } from './store/database.ts';
import type { EmbeddedMemoryPool } from './store/embedded.ts';
import { DatabaseFernetKeys, DatabaseJwsKeys, DatabaseKeyStore, type KeyChangeNotices } from './token/database-key-store.ts';
import type { FernetKeySource } from './token/key-source.ts';
import { FernetKeyRepository } from './token/fernet-key-repository.ts';
import { AUTH_METHODS, FernetTokenProvider } from './token/fernet-provider.ts';
import { TotpAuthenticator } from './token/totp.ts';
import { ReceiptService } from './receipt/receipt-service.ts';
import { JwsKeyRepository } from './token/jws-key-repository.ts';
import { KeyAgreement, NodeKeyAgreement, pepperFingerprint } from './token/key-agreement.ts';
import { JwsTokenProvider } from './token/jws-provider.ts';
import type { TokenProvider } from './token/token-provider.ts';
import { LoginThrottle } from './token/login-throttle.ts';
import { TokenService } from './token/token-service.ts';
import { MemoryRateLimiter, RedisRateLimiter } from './token/rate-limiter.ts';
import { UuidTokenProvider } from './token/uuid-provider.ts';

export interface BuildOptions {
  clock?: Clock;
  /** Overrides where the embedded database lives ('memory' in tests). */
  embeddedDirectory?: string | 'memory';
  /** Memories for the embedded database, reused across the applications one process builds (tests). */
  embeddedMemoryPool?: EmbeddedMemoryPool;
  /** Compiled schemas, shared by the applications one process builds (tests); else the application's own. */
  schemaCompilers?: SchemaCompilers;
  /** A pino logger, or false to log nothing (tests). */
  logger?: Logger | false;
  /** False when another process (the cluster primary) has already migrated the database. */
  migrate?: boolean;
  /** How changes reach this process's caches from its siblings when there is no REDIS_URL (cluster workers). */
  eventBus?: EventBus;
  /** How this process asks its siblings for gateway decisions it does not hold when there is no REDIS_URL (cluster workers). */
  decisionPeers?: DecisionPeers;
  /**
   * False for processes that issue no tokens (manage bootstrap): they neither record nor check the
   * fingerprints of token keys and pepper the nodes sharing the database must agree on.
   */
  keyAgreement?: boolean;
  /**
   * Which domains have an identity back end of their own (`[identity] driver = ldap` and their
   * `[ldap]` options, as Keystone's domain config API holds them). Default: the domain config
   * service (the API and DOMAIN_CONFIG_DIR); tests may hand in a source of their own.
   */
  domainIdentityConfigs?: DomainIdentityConfigSource;
  /**
   * What turns a federated login request into a verified assertion (the OIDC verifier; tests hand
   * in their own). Default: none, so every federated login is a 401.
   */
  assertionVerifiers?: readonly AssertionVerifier[];
}

/** Every service, built once and wired together; the HTTP server on top. */
export interface Application extends IdentityApi {
  server: App;
  store: Store;
  tokenProvider: TokenProvider;
  /** The gateway policy in force, and an on-demand reload (the files are also watched). */
  policy(): GatewayPolicy;
  reloadPolicy(): Promise<boolean>;
  reloadIdentityPolicy(): Promise<boolean>;
  /** Every route of the identity API (tests apply security cases to each). */
  routes: RouteInfo[];
  /** Cuts every client connection (a shutdown that ran out of time). */
  closeAllConnections(): void;
  close(): Promise<void>;
}

function createTokenProvider(config: Config, store: Store, log: FastifyBaseLogger, notices: KeyChangeNotices): TokenProvider {
  const fernetFiles = new FernetKeyRepository(config.fernetKeyRepository, config.fernetMaxActiveKeys);
  const jwsFiles = new JwsKeyRepository(config.jwsKeyRepository, config.jwsMaxActiveKeys);
  // KEY_ENCRYPTION_KEY: keys shared by every node through the database (files are only imported once).
  const databaseKeys = config.keyEncryptionKey ? new DatabaseKeyStore(store, config.keyEncryptionKey, config.previousKeyEncryptionKeys) : undefined;
  const sourceOptions = { reloadIntervalMs: config.keyReloadIntervalMs, notices, log };
  switch (config.tokenProvider) {
    case 'fernet':
      return new FernetTokenProvider(
        databaseKeys ? new DatabaseFernetKeys(databaseKeys, config.fernetMaxActiveKeys, { ...sourceOptions, importFrom: fernetFiles }) : fernetFiles,
        log,
      );
    case 'jws':
      return new JwsTokenProvider(databaseKeys ? new DatabaseJwsKeys(databaseKeys, config.jwsMaxActiveKeys, { ...sourceOptions, importFrom: jwsFiles }) : jwsFiles, log);
    case 'uuid':
      log.warn('TOKEN_PROVIDER=uuid is deprecated (Keystone removed it in Rocky): every token is a database row; prefer fernet or jws');
      return new UuidTokenProvider(store);
  }
}

/**
 * Keystone's credential keys: a key repository on disk (CREDENTIAL_KEY_REPOSITORY), or, with
 * KEY_ENCRYPTION_KEY, the database, as token keys are (the files are then only imported once).
 */
function createCredentialKeySource(config: Config, store: Store, log: FastifyBaseLogger, notices: KeyChangeNotices): FernetKeySource {
  const files = new FernetKeyRepository(config.credentialKeyRepository, CREDENTIAL_MAX_ACTIVE_KEYS);
  if (!config.keyEncryptionKey) return files;
  const keys = new DatabaseKeyStore(store, config.keyEncryptionKey, config.previousKeyEncryptionKeys);
  return new DatabaseFernetKeys(keys, CREDENTIAL_MAX_ACTIVE_KEYS, { reloadIntervalMs: config.keyReloadIntervalMs, notices, log, importFrom: files, provider: 'credential' });
}

/** IDENTITY_MOUNT as a first segment. */
const IDENTITY_MOUNT_SEGMENT = IDENTITY_MOUNT.slice(1);
/** node:http's maxHeadersCount when the server's is null. */
const NODE_MAX_HEADERS_COUNT = 2000;

/**
 * First path segments that belong to the identity API and its operations, never to a service: a
 * service whose type is one of them cannot be reached through the gateway (docs/gateway.md). A
 * switch, not a Set: the segment is cut out of each request afresh, and a Set lookup would
 * internalize it (support/segments.ts).
 */
function isIdentitySegment(segment: string): boolean {
  switch (segment) {
    case '':
    case 'v3':
    case 'healthz':
    case 'readyz':
    case 'metrics':
    case 'openapi.json':
    case 'api-docs':
    case 'Shibboleth.sso': // the SAML ECP consumer (routes/saml-ecp.ts), where Shibboleth has it
      return true;
    default:
      return false;
  }
}

/** The first segment of an origin-form target ('' for /, /?…). */
function firstSegment(url: string): string {
  const end = url.slice(1).search(/[/?]/);
  return end === -1 ? url.slice(1) : url.slice(1, end + 1);
}

/** A plain request the request front may answer: an origin-form target on a service's path. */
function frontTakes(target: string): boolean {
  if (!target.startsWith('/')) return false; // absolute-form: node:http's, and the gateway refuses it there
  const first = firstSegment(target);
  return !isIdentitySegment(first) && first !== IDENTITY_MOUNT_SEGMENT;
}

/** Decides the face of a request; strips the /identity mount (remembering it for links). */
function routeToGateway(request: http.IncomingMessage): boolean {
  const url = request.url ?? '/';
  if (!url.startsWith('/')) return true; // absolute-form targets: the gateway refuses them
  const first = firstSegment(url);
  if (isIdentitySegment(first)) return false;
  if (first === IDENTITY_MOUNT_SEGMENT) {
    request.url = url.slice(IDENTITY_MOUNT.length) || '/';
    (request as { [MOUNT_PREFIX]?: string })[MOUNT_PREFIX] = IDENTITY_MOUNT;
    return false;
  }
  return true;
}

/** Malformed requests, oversized headers, smuggling attempts: answered before any handler runs. */
function answerClientError(error: NodeJS.ErrnoException, socket: Duplex): void {
  const status = error.code === 'HPE_HEADER_OVERFLOW' ? 431 : error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
  answerOnSocket(socket, status, http.STATUS_CODES[status] ?? 'Bad Request');
}

/** A Keystone-shaped error written straight to a socket that no handler will see, then closed. */
function answerOnSocket(socket: Duplex, status: number, message: string, extraHeaders = ''): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const body = errorEnvelope(status, message);
  socket.end(
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${extraHeaders}Connection: close\r\n\r\n${body}`,
  );
}

/**
 * How long after UPSTREAM_RESPONSE_TIMEOUT_MS a connection may sit without a byte before it counts as
 * stalled: the gateway's deadlines pass up to two ticks (≤ 1 s each) late, and its 504 must be
 * written before the connection is closed.
 */
const UPSTREAM_ANSWER_MARGIN_MS = 3000;

/** The composition root: opens the store, runs migrations, builds each service once. */
export async function buildApplication(config: Config, options: BuildOptions = {}): Promise<Application> {
  const clock = options.clock ?? systemClock;
  // SAML signing keys: read and checked before anything starts (a bad file stops the start).
  const samlKeys = config.saml.certFile && config.saml.keyFile ? loadSigningKeys(config.saml.certFile, config.saml.keyFile) : undefined;
  const store = await Store.open({
    databaseUrl: config.databaseUrl,
    embeddedDirectory: options.embeddedDirectory ?? embeddedDirectoryOf(config.dataDir),
    ...(options.embeddedMemoryPool ? { embeddedMemoryPool: options.embeddedMemoryPool } : {}),
    ...config.database,
  });
  // What has been started so far, stopped in reverse if building fails half-way (a test or an
  // embedding caller must not be left with timers, watchers or Redis connections).
  const startedParts: Array<() => unknown> = [];
  try {
    if (options.migrate !== false) await store.migrate();
    // Set when close() begins: /readyz answers 503 and responses close their connections.
    let draining = false;
    // One HTTP server, two faces: requests for /{service_type}/… go straight to the gateway (no
    // framework work on the proxy path); /, /v3/… and /identity/v3/… go to the identity API.
    let gateway: Gateway | undefined;
    let stalledConnections: StalledConnections | undefined;
    let requestFront: RequestFront | undefined;
    const server = Fastify({
      serverFactory: (identityHandler) => {
        const dispatch = (request: http.IncomingMessage, response: http.ServerResponse, expectsContinue: boolean): void => {
          if (response.socket === null) {
            // Pipelined behind an answer not yet written: handled once its own answer can be. After
            // an answer that closes the connection (a refused Expect: 100-continue whose client sent
            // on regardless) it never is: nothing is done for an answer no one would receive.
            response.once('socket', () => dispatch(request, response, expectsContinue));
            return;
          }
          if (draining) response.shouldKeepAlive = false;
          if (gateway && routeToGateway(request)) gateway.handle(request, response, expectsContinue);
          else {
            if (expectsContinue) markExpectsContinue(request);
            identityHandler(request, response);
          }
        };
        const httpServer = http.createServer(
          {
            maxHeaderSize: config.maxHeaderBytes,
            requestTimeout: config.requestTimeoutMs,
            headersTimeout: config.headersTimeoutMs,
            // A request without Content-Length or Transfer-Encoding has no body: its stream starts
            // ended and emits nothing, sparing each such request the stream's end and close events
            // and their ticks (most of the gateway's traffic; bench/README.md).
            optimizeEmptyRequests: true,
            // Strict parsing whatever node's flags say (--insecure-http-parser): a header name that is not
            // a token, or a value with a control character, is refused with a 400 here, and the
            // gateway forwards the client's headers without testing them again (src/gateway/upstream-request.ts).
            insecureHTTPParser: false,
          },
          (request, response) => dispatch(request, response, false),
        );
        // Expect: 100-continue is answered once the request is authenticated, not at once (src/http/expect.ts).
        httpServer.on('checkContinue', (request: http.IncomingMessage, response: http.ServerResponse) => {
          if (onlyContinueExpected(request)) dispatch(request, response, true);
          else answerExpectationFailed(request, response, log);
        });
        httpServer.on('checkExpectation', (request: http.IncomingMessage, response: http.ServerResponse) => answerExpectationFailed(request, response, log));
        // Node hands CONNECT to a 'connect' listener, and closes the socket silently without one.
        httpServer.on('connect', (_request, socket: Duplex) =>
          answerOnSocket(socket, 405, 'The method is not allowed for the requested URL.', 'Allow: GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS\r\n'),
        );
        // With a server factory, fastify leaves the timeouts to us; Node's 0 would mean "no limit".
        httpServer.keepAliveTimeout = 72_000;
        // A connection that stalls mid-request or mid-response (a client that stops reading) is
        // closed after twice the request timeout, or once a silent upstream's 504 has had time to
        // reach it: swept, not a timer per socket (stalled-connections.ts). Monotonic time but in
        // tests, whose clock moves by hand.
        stalledConnections = new StalledConnections(httpServer, {
          stallMs: Math.max(config.requestTimeoutMs * 2, config.upstreamResponseTimeoutMs + UPSTREAM_ANSWER_MARGIN_MS),
          now: options.clock ? () => clock.now() : () => performance.now(),
          timedElsewhere: (socket) => requestFront?.waitsForRequest(socket) ?? false,
        });
        startedParts.push(() => stalledConnections?.stop());
        if (config.gatewayRequestFront) {
          requestFront = new RequestFront(httpServer, {
            limits: { maxHeaderBytes: config.maxHeaderBytes, maxHeaders: httpServer.maxHeadersCount ?? NODE_MAX_HEADERS_COUNT },
            headersTimeoutMs: config.headersTimeoutMs,
            keepAliveTimeoutMs: httpServer.keepAliveTimeout,
            // The waits run on real monotonic time, as the socket timers they replace did: a test
            // that moves its clock by hours must not find its keep-alive connection closed under it.
            now: () => Date.now(),
            takes: (head) => gateway !== undefined && frontTakes(head.target),
            handle: (request, response) => {
              if (draining) response.shouldKeepAlive = false;
              gateway!.handle(request, response, false);
            },
          });
        }
        startedParts.push(() => requestFront?.stop());
        return httpServer;
      },
      clientErrorHandler: answerClientError,
      loggerInstance: options.logger === false ? undefined : (options.logger as FastifyBaseLogger | undefined),
      logger: options.logger === false ? false : undefined,
      bodyLimit: config.bodyLimitBytes,
      routerOptions: { ignoreTrailingSlash: true, maxParamLength: 255 },
      // Requests already on a connection when shutdown begins are served (Connection: close), not
      // refused with fastify's non-Keystone 503; /readyz tells balancers to stop sending.
      return503OnClosing: false,
      exposeHeadRoutes: true,
      frameworkErrors: handleFrameworkError,
    }).withTypeProvider<TypeBoxTypeProvider>();
    const schemaCompilers = options.schemaCompilers ?? new SchemaCompilers();
    server.setValidatorCompiler(schemaCompilers.validator);
    server.setSerializerCompiler(schemaCompilers.serializer);

    const log = server.log;
    // A partition's start and end: one line each (requests refused meanwhile log nothing of it).
    store.health.onChange((reachable, { reason, unreachableForMs }) => {
      if (reachable) log.info({ unreachableForMs }, 'database reachable again: caches re-read, requests that need the database served again');
      else log.warn({ reason }, 'database unreachable: serving cached tokens, catalogs and upstreams; requests that need the database answer 503 until a probe succeeds');
    });
    store.watchHealth();
    startedParts.push(() => store.health.stop());
    const revocations = new Revocations(store, clock);
    await revocations.load();
    const bus = config.redisUrl ? new RedisEventBus(config.redisUrl, log, { channel: config.redisEventsChannel }) : (options.eventBus ?? new LocalEventBus());
    const accessEpoch = new AccessEpoch(store);
    const sync = new ClusterSync(store, revocations, bus, log, { clock, staleValidationMaxMs: config.staleValidationMaxSeconds * 1000, accessEpoch });
    sync.start();
    startedParts.push(() => sync.close());
    if (config.redisUrl && config.revocationPollIntervalMs > 0) sync.pollRevocations(config.revocationPollIntervalMs);
    const keyNotices: KeyChangeNotices = { publish: () => sync.keysChanged(), subscribe: (listener) => sync.onKeysChanged(listener) };
    const tokenProvider = createTokenProvider(config, store, log, keyNotices);
    tokenProvider.onReload(() => sync.invalidate());
    startedParts.push(() => tokenProvider.stop());
    await tokenProvider.start();
    let tokenKeysLoaded = true;

    const pepper = loadPepper(config.secretPepper, path.join(config.dataDir, 'secret-pepper'));
    if (pepper.created) {
      log.info({ file: path.join(config.dataDir, 'secret-pepper') }, 'generated the application-credential pepper; nodes sharing a database must share SECRET_PEPPER');
    }
    // Nodes sharing a PostgreSQL database must use the same token keys and pepper, or each silently
    // refuses the others' tokens and application credentials (an embedded database has one node).
    let keyAgreement: NodeKeyAgreement | undefined;
    if (store.kind === 'postgresql' && options.keyAgreement !== false) {
      const pepperSet = pepperFingerprint(pepper.pepper);
      const repository = config.tokenProvider === 'jws' ? config.jwsKeyRepository : config.fernetKeyRepository;
      const agreement = new NodeKeyAgreement(new KeyAgreement(store), {
        sets: () => (tokenProvider.keyFingerprints ? [tokenProvider.keyFingerprints, pepperSet] : [pepperSet]),
        keysWhere: config.keyEncryptionKey ? 'the database (KEY_ENCRYPTION_KEY)' : repository,
        checkIntervalMs: config.keyReloadIntervalMs,
        log,
      });
      await agreement.establish();
      startedParts.push(() => agreement.stop());
      tokenProvider.onReload(() => agreement.keysReloaded());
      keyAgreement = agreement;
    }
    const passwords = new PasswordHasher({ bcryptRounds: config.passwordHashRounds });
    // Each cache drops what it holds when a topic it depends on changes (events/change-topics.ts).
    const resources = new ResourceService(store, revocations, clock, sync.epochOf(CACHE_TOPICS.resource));
    // Each domain's own configuration, followed across nodes (change topics): the source of per-domain identity back ends
    // (a DomainIdentityConfigSource: built before the identity service, which may be handed it).
    const domainConfigs = new DomainConfigService(store, resources, { directory: config.domainConfigDirectory, securityCompliance: config.securityCompliance, log });
    await domainConfigs.start(sync);
    startedParts.push(() => domainConfigs.stop());
    // Each domain's users and groups: SQL, or the directory its configuration names (public ids mapped in SQL).
    const idMappings = new IdMappings();
    const identityRepository = new IdentityRepository(new SqlIdentityBackend(), {
      configs: options.domainIdentityConfigs ?? domainConfigs,
      mappings: idMappings,
      drivers: { ldap: ldapDriver(idMappings, clock) },
    });
    await identityRepository.load(store.reader());
    startedParts.push(() => identityRepository.close());
    const identity = new IdentityService(
      store,
      resources,
      passwords,
      revocations,
      clock,
      config.securityCompliance,
      sync.epochOf(CACHE_TOPICS.identity),
      undefined,
      accessEpoch,
      identityRepository,
    );
    const assignments = new AssignmentService(store, identity, resources, revocations, sync.epochOf(CACHE_TOPICS.effectiveRoles), accessEpoch);
    const applicationCredentials = new ApplicationCredentialService(store, identity, new SecretHasher(pepper.pepper, passwords), clock, sync.epochOf(CACHE_TOPICS.credential), undefined, accessEpoch);
    const catalogGeneration = sync.generationOf(CACHE_TOPICS.catalog);
    const endpointFilter = new EndpointFilterService(store);
    const catalog = new CatalogService(store, catalogGeneration, () => sync.servingLastKnown, endpointFilter);
    // Rate-limit counters and the audit stream share one command connection (pub/sub has its own).
    // A command Redis does not answer within a second fails: rate limits fall back to this node's counters.
    const redis = config.redisUrl
      ? new Redis(config.redisUrl, { enableOfflineQueue: false, maxRetriesPerRequest: 1, connectTimeout: 2000, commandTimeout: 1000, retryStrategy: (attempt) => Math.min(attempt * 100, 1000) })
      : undefined;
    redis?.on('error', () => {});
    startedParts.push(() => redis?.disconnect());
    // Audit lines are kept whatever LOG_LEVEL hides (only 'silent' silences them).
    const auditSinks: AuditSink[] = [new LogAuditSink(config.logLevel === 'silent' ? log : log.child({}, { level: 'info' }))];
    if (redis) auditSinks.push(new RedisStreamAuditSink(redis, config.auditStream, config.auditStreamMaxLength, log));
    const audit = new AuditTrail(auditSinks, clock);
    const loginThrottle = new LoginThrottle(
      redis ? new RedisRateLimiter(redis, config.rateLimitKeyPrefix, clock, log) : new MemoryRateLimiter(clock),
      config.authRateLimit,
      {
        userIdOf: async (reference) => (await identity.resolveUser(reference))?.id ?? null,
        domainIdOf: async (name) => (await resources.findDomainByName(name))?.id ?? null,
      },
    );
    const clientAddress = clientAddressResolver(config.trustedProxies);
    const trusts = new TrustService(store, identity, resources, assignments, revocations, clock, { maxRedelegationCount: config.trustMaxRedelegationCount }, accessEpoch);
    const oauth1 = new OAuth1Service(store, resources, assignments, new SecretBox(pepper.pepper), clock, {
      requestToken: config.oauth1RequestTokenDuration,
      accessToken: config.oauth1AccessTokenDuration,
    }, accessEpoch);
    // MFA receipts are sealed with the Fernet token keys (Keystone's [fernet_receipts] key_repository
    // defaults to its token key directory); with another token provider, with FERNET_KEY_REPOSITORY's files.
    const receiptKeys = tokenProvider instanceof FernetTokenProvider ? tokenProvider : new FernetTokenProvider(new FernetKeyRepository(config.fernetKeyRepository, config.fernetMaxActiveKeys), log);
    if (receiptKeys !== tokenProvider) {
      startedParts.push(() => receiptKeys.stop());
      await receiptKeys.start();
    }
    const receipts = new ReceiptService(receiptKeys, resources, clock, config.receiptExpiration, AUTH_METHODS);
    // The totp method reads the user's totp credentials (the credential service is built below).
    const totp = new TotpAuthenticator(identity, (userId: string): Promise<string[]> => credentials.totpSecrets(userId), clock, config.totpIncludedPreviousWindows);
    const federation = new FederationService(store, resources, sync);
    // One provider cache (discovery, JWKS) for the Bearer verifier and websso.
    const oidcProviders = new OidcProviderDirectory({
      fetch: (input, init) => fetch(input, init),
      clock,
      httpTimeoutMs: config.oidc.httpTimeoutMs,
      cacheMs: config.oidc.metadataCacheSeconds * 1000,
      refreshIntervalMs: config.oidc.jwksRefreshIntervalSeconds * 1000,
    });
    // The trusted SAML identity providers: one reader for SAML logins and SAML websso.
    const samlMetadata = new TrustedIdpMetadata(config.samlSp.trustedIdpMetadata, {
      clock,
      refreshMs: config.samlSp.metadataRefreshSeconds * 1000,
      httpTimeoutMs: config.samlSp.metadataHttpTimeoutMs,
      log,
    });
    // Assertion ids (and ECP sessions) already used: shared by every node through Redis when configured.
    const samlReplays = redis ? new RedisReplayCache(redis, config.samlSp.replayKeyPrefix, clock) : new MemoryReplayCache(clock);
    const samlVerifier = new SamlAssertionVerifier(config.samlSp, {
      clock,
      log,
      metadata: samlMetadata,
      replayCache: samlReplays,
    });
    // Websso login states (OIDC and SAML) and SAML ECP sessions: sealed with a key derived from the
    // pepper every node shares.
    const webSsoSealer = new WebSsoStateSealer(pepper.pepper);
    // Shibboleth's ECP consumer (/Shibboleth.sso/SAML2/ECP): the session it answers is a login at the login URL.
    const samlEcpSessions = new SamlEcpSessions({
      verifier: samlVerifier,
      sealer: webSsoSealer,
      replays: samlReplays,
      federation,
      clock,
      protocols: config.samlSp.protocols,
      ttlSeconds: config.websso.stateTtlSeconds,
      clockSkewSeconds: config.samlSp.clockSkewSeconds,
      log,
    });
    // Federated logins believe only what a verifier checked itself: OIDC bearer tokens, SAML
    // responses (the login URL and the mapped method of POST /v3/auth/tokens alike), SAML ECP
    // sessions (the login URL only: only it passes cookies).
    const assertionVerifiers = options.assertionVerifiers ?? [
      new OidcAssertionVerifier(config.oidc, { clock, log, directory: oidcProviders }),
      samlEcpSessions,
      samlVerifier,
    ];
    const federatedLogin = new FederatedLogin(
      store,
      federation,
      identity,
      resources,
      assignments,
      {
        remoteIdAttribute: config.federationRemoteIdAttribute,
        // Keystone's recommended [saml2] remote_id_attribute = Shib-Identity-Provider, for each SAML protocol.
        protocolRemoteIdAttributes: Object.fromEntries(config.samlSp.remoteIdAttribute ? config.samlSp.protocols.map((id) => [id, config.samlSp.remoteIdAttribute]) : []),
      },
      assertionVerifiers,
    );
    const tokens = new TokenService(tokenProvider, store, identity, resources, assignments, applicationCredentials, revocations, clock, config.tokenExpiration, sync, trusts, oauth1, {
      totp,
      receipts,
    }, federatedLogin);
    // Credential blobs are encrypted at rest with Keystone's credential keys (created on first start).
    const credentialKeys = new CredentialEncryption(createCredentialKeySource(config, store, log, keyNotices), log, () => clock.now());
    startedParts.push(() => credentialKeys.stop());
    await credentialKeys.start();
    const credentials = new CredentialService(store, credentialKeys, identity, resources, tokens, clock, { authTtlMinutes: config.credentialAuthTtlMinutes });
    // GET /metrics; nothing is recorded when METRICS_ALLOWED_NETWORKS is empty (no one could read it).
    const metrics = config.metricsAllowedNetworks.length > 0 ? new ServiceMetrics() : undefined;
    // One counter object for every gateway policy a reload builds, so hits and misses carry over.
    const decisionCacheStats = { hits: 0, misses: 0 };
    const policyReloader = new PolicyReloader({
      directory: config.policyDirectory,
      onSwap: (next) => {
        policy = next;
      },
      log,
      policyOptions: { decisionCacheStats },
    });
    // onSwap runs only after start(), by which time `policy` holds the initial load.
    let policy: GatewayPolicy = await policyReloader.loadInitial();
    policyReloader.start();
    startedParts.push(() => policyReloader.stop());
    // Keystone's identity:* rules (IDENTITY_POLICY_DIR) reload the same way.
    const identityPolicyReloader = new PolicyReloader<IdentityPolicy>({
      directory: config.identityPolicyDirectory,
      load: (directory) => IdentityPolicy.load(directory),
      name: 'identity policy',
      onSwap: (next) => {
        identityPolicy = next;
      },
      log,
    });
    let identityPolicy = await identityPolicyReloader.loadInitial();
    identityPolicyReloader.start();
    startedParts.push(() => identityPolicyReloader.stop());
    // POLICY_SHADOW_DIR: decided beside the live policy, never enforced; the decisions kept for lookup.
    const shadowPolicy = config.policyShadowDirectory ? await ShadowPolicy.start(config.policyShadowDirectory, log) : undefined;
    startedParts.push(() => shadowPolicy?.stop());
    const { kept, keyPrefix, ttlSeconds } = config.gatewayDecisions;
    // Each node answers the others' lookups from its ring: with Redis over pub/sub (a subscribed
    // connection of its own), else (cluster workers) through the primary.
    const redisPeers =
      kept > 0 && redis && config.redisUrl
        ? new RedisDecisionPeers(redis, new Redis(config.redisUrl, { maxRetriesPerRequest: 1, connectTimeout: 2000, retryStrategy: (attempt) => Math.min(attempt * 100, 1000) }), keyPrefix, log)
        : undefined;
    const decisionPeers = kept > 0 ? (redisPeers ?? options.decisionPeers) : undefined;
    const decisions = kept > 0 ? new DecisionStore({ kept, clock, redis: redis ? { client: redis, keyPrefix, ttlSeconds, log } : undefined, peers: decisionPeers }) : undefined;
    if (decisionPeers) startedParts.push(() => decisionPeers.close());
    await redisPeers?.start();
    const internalEndpoints = new InternalEndpoints(catalog, { region: config.gatewayRegion, generation: catalogGeneration, servingLastKnown: () => sync.servingLastKnown });
    // What clients are told: the gateway's view (its public URL for what it serves), or the registered catalog.
    const clientCatalog = config.gatewayPublicCatalog
      ? new GatewayCatalog(catalog, internalEndpoints, { publicUrl: config.publicUrl, region: config.gatewayRegion, policy: () => policy })
      : catalog;
    const activeGateway = new Gateway(
      tokens,
      internalEndpoints,
      { current: () => policy, shadow: shadowPolicy?.current },
      catalog,
      {
        publicUrl: config.publicUrl,
        publicUrlFixed: config.publicUrlFixed,
        serviceTokenRoles: config.serviceTokenRoles,
        serviceCatalogHeader: config.gatewayServiceCatalogHeader,
        connectTimeoutMs: config.upstreamConnectTimeoutMs,
        responseTimeoutMs: config.upstreamResponseTimeoutMs,
        bodyTimeoutMs: config.upstreamResponseTimeoutMs,
        connectionsPerUpstream: config.upstreamConnections,
        circuit: { failureThreshold: config.upstreamCircuitFailures, openMs: config.upstreamCircuitOpenMs },
        trustedProxies: config.trustedProxies,
      },
      log,
      catalogGeneration,
      {
        denied: (request, record) =>
          audit.gatewayDenied(
            {
              address: clientAddress(request.socket.remoteAddress, request.headers),
              agent: request.headers['user-agent'],
              requestId: record.request_id,
              userId: record.user_id,
              projectId: record.project_id,
            },
            { service: record.service ?? '', method: record.method, path: record.path, status: record.status ?? 0, reason: record.reason ?? '', rule: record.rule, tokenAuditId: record.audit_id },
          ),
      },
      { clock, ...(metrics ? { instruments: metrics } : {}), ...(decisions ? { decisions } : {}) },
    );
    gateway = activeGateway;
    startedParts.push(() => activeGateway.close());
    metrics?.attach({
      tokenValidations: () => tokens.validationStats,
      caches: () => [
        ['token_validation', { hits: tokens.validationStats.cacheHits, misses: tokens.validationStats.cacheMisses }],
        ['policy_decision', decisionCacheStats],
        ['catalog', catalog.cacheStats],
        ...(shadowPolicy ? [['policy_shadow_decision', shadowPolicy.decisionCacheStats] as [string, typeof decisionCacheStats]] : []),
      ],
      policyReloads: () => [
        ['gateway', policyReloader.reloadCounts],
        ['identity', identityPolicyReloader.reloadCounts],
        ...(shadowPolicy ? [['gateway_shadow', shadowPolicy.reloader.reloadCounts] as [string, typeof policyReloader.reloadCounts]] : []),
      ],
      circuits: () => activeGateway.circuitStates(),
      database: () => ({ reachable: store.health.reachable, partitions: store.health.partitions }),
    });

    // Websso login states: single-use across nodes through Redis; Redis out of reach: this node's memory decides.
    const webSsoReplays = redis
      ? new RedisReplayCache(redis, config.websso.replayKeyPrefix, clock, { fallback: 'this-node', log, message: 'websso: Redis did not answer; this login state is single-use on this node only' })
      : new MemoryReplayCache(clock);
    const api: IdentityApi = {
      config,
      resources,
      identity,
      assignments,
      applicationCredentials,
      trusts,
      oauth1,
      catalog,
      endpointFilter,
      limits: new LimitService(store),
      domainConfigs,
      clientCatalog,
      policies: new PolicyStoreService(store, catalog),
      federation,
      federatedLogin,
      assertionVerifiers,
      // Browser single sign-on (websso) as an OIDC relying party.
      oidcWebSso: new OidcWebSso({ websso: config.websso, oidc: config.oidc, directory: oidcProviders, federation, federatedLogin, sealer: webSsoSealer, replays: webSsoReplays, clock, log }),
      // The same for SAML protocols: an AuthnRequest (signed with SAML_KEYFILE when set), the response verified as a SAML login's.
      samlWebSso: new SamlWebSso({ websso: config.websso, samlSp: config.samlSp, metadata: samlMetadata, verifier: samlVerifier, federation, federatedLogin, sealer: webSsoSealer, replays: webSsoReplays, clock, keys: samlKeys }),
      // Shibboleth's ECP consumer: a verified response kept for the login URL (K2K's sp_url).
      samlEcpSessions,
      saml: new SamlIdentityProvider({ settings: config.saml, keys: samlKeys, clock, federation, tokens, identity, resources }),
      credentials,
      tokens,
      tokenProvider,
      revocations,
      authorizer: new PolicyIdentityAuthorizer(() => identityPolicy),
      gateway: activeGateway,
      audit,
      loginThrottle,
      clientAddress,
      ...(metrics ? { metrics } : {}),
    };
    const routes = registerIdentityApi(server, api, {
      draining: () => draining,
      checks: {
        // PostgreSQL: what the health probe found (it runs every second at most, so this follows a
        // partition and its end within one interval, and a flood of probes costs no query).
        database:
          store.kind === 'postgresql'
            ? () => store.health.reachable
            : async () => {
                await store.ping();
                return true;
              },
        // Keys and policies load before the server starts; a failed reload keeps the loaded ones
        // (a failed token key reload still reports not ready, until a reload succeeds).
        token_keys: () => tokenKeysLoaded && tokenProvider.keysReady,
        key_agreement: () => {
          const problem = keyAgreement?.problem;
          if (problem) throw new Error(problem);
          return true;
        },
        gateway_policy: () => policy !== undefined,
        identity_policy: () => identityPolicy !== undefined,
      },
    });
    await server.ready();
    // Every module the application starts with has been evaluated, ioredis's among them.
    restoreFastPrimitivePrototypes();

    return {
      ...api,
      server,
      store,
      routes,
      policy: () => policy,
      reloadPolicy: () => policyReloader.reload(),
      reloadIdentityPolicy: () => identityPolicyReloader.reload(),
      closeAllConnections() {
        server.server.closeAllConnections();
        requestFront?.closeAllConnections();
      },
      async close() {
        draining = true;
        tokenProvider.stop();
        credentialKeys.stop();
        keyAgreement?.stop();
        tokenKeysLoaded = false;
        policyReloader.stop();
        identityPolicyReloader.stop();
        shadowPolicy?.stop();
        domainConfigs.stop();
        // A connection whose request finishes during the drain would keep the process until its
        // keep-alive timeout: close such connections as they become idle.
        const closeIdle = setInterval(() => {
          server.server.closeIdleConnections();
          requestFront?.closeIdleConnections();
        }, 100);
        try {
          await server.close();
        } finally {
          clearInterval(closeIdle);
          stalledConnections?.stop();
          requestFront?.stop();
        }
        await activeGateway.close();
        // Left in Redis for the nodes that go on, before this node stops answering them.
        await decisions?.retire();
        await decisionPeers?.close();
        metrics?.close();
        await sync.close();
        redis?.disconnect();
        await identityRepository.close();
        await store.close();
      },
    };
  } catch (error) {
    for (const stop of startedParts.reverse()) {
      try {
        await stop();
      } catch {
        // Already failing: the original error is the one to report.
      }
    }
    await store.close();
    throw error;
  }
}
