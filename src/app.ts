import path from 'node:path';
import Fastify, { type FastifyBaseLogger } from 'fastify';
import { TypeBoxValidatorCompiler, type TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Logger } from 'pino';
import { AssignmentService } from './assignment/assignment-service.ts';
import { CatalogService } from './catalog/catalog-service.ts';
import { systemClock, type Clock } from './clock.ts';
import type { Config } from './config.ts';
import { ClusterSync } from './events/cluster-sync.ts';
import { LocalEventBus, RedisEventBus } from './events/event-bus.ts';
import { Revocations } from './events/revocation.ts';
import type { App, IdentityApi } from './http/context.ts';
import { handleFrameworkError } from './http/errors.ts';
import { registerIdentityApi, type RouteInfo } from './http/identity-api.ts';
import { IdentityService } from './identity/identity-service.ts';
import { ApplicationCredentialService } from './identity/application-credential-service.ts';
import { PasswordHasher } from './identity/password-hash.ts';
import { loadPepper, SecretHasher } from './identity/secret-hash.ts';
import { InterimIdentityAuthorizer } from './policy/identity-authorizer.ts';
import { ResourceService } from './resource/resource-service.ts';
import { embeddedDirectoryOf, Store } from './store/database.ts';
import { FernetKeyRepository } from './token/fernet-key-repository.ts';
import { FernetTokenProvider } from './token/fernet-provider.ts';
import { JwsKeyRepository } from './token/jws-key-repository.ts';
import { JwsTokenProvider } from './token/jws-provider.ts';
import type { TokenProvider } from './token/token-provider.ts';
import { TokenService } from './token/token-service.ts';
import { UuidTokenProvider } from './token/uuid-provider.ts';

export interface BuildOptions {
  clock?: Clock;
  /** Overrides where the embedded database lives ('memory' in tests). */
  embeddedDirectory?: string | 'memory';
  /** A pino logger, or false to log nothing (tests). */
  logger?: Logger | false;
}

/** Every service, built once and wired together; the HTTP server on top. */
export interface Application extends IdentityApi {
  server: App;
  store: Store;
  tokenProvider: TokenProvider;
  /** Every route of the identity API (tests apply security cases to each). */
  routes: RouteInfo[];
  close(): Promise<void>;
}

function createTokenProvider(config: Config, store: Store, log: FastifyBaseLogger): TokenProvider {
  switch (config.tokenProvider) {
    case 'fernet':
      return new FernetTokenProvider(new FernetKeyRepository(config.fernetKeyRepository, config.fernetMaxActiveKeys), log);
    case 'jws':
      return new JwsTokenProvider(new JwsKeyRepository(config.jwsKeyRepository, config.jwsMaxActiveKeys), log);
    case 'uuid':
      log.warn('TOKEN_PROVIDER=uuid is deprecated (Keystone removed it in Rocky): every token is a database row; prefer fernet or jws');
      return new UuidTokenProvider(store);
  }
}

/** The composition root: opens the store, runs migrations, builds each service once. */
export async function buildApplication(config: Config, options: BuildOptions = {}): Promise<Application> {
  const clock = options.clock ?? systemClock;
  const store = await Store.open({
    databaseUrl: config.databaseUrl,
    embeddedDirectory: options.embeddedDirectory ?? embeddedDirectoryOf(config.dataDir),
  });
  try {
    await store.migrate();
    const server = Fastify({
      loggerInstance: options.logger === false ? undefined : (options.logger as FastifyBaseLogger | undefined),
      logger: options.logger === false ? false : undefined,
      // Fastify's defaults of 0 mean "no limit", which invites slow-client attacks.
      connectionTimeout: config.requestTimeoutMs * 2,
      requestTimeout: config.requestTimeoutMs,
      keepAliveTimeout: 72_000,
      bodyLimit: config.bodyLimitBytes,
      routerOptions: { ignoreTrailingSlash: true, maxParamLength: 255 },
      return503OnClosing: true,
      exposeHeadRoutes: true,
      frameworkErrors: handleFrameworkError,
    }).withTypeProvider<TypeBoxTypeProvider>();
    server.setValidatorCompiler(TypeBoxValidatorCompiler);

    const log = server.log;
    const revocations = new Revocations(store, clock);
    await revocations.load();
    const bus = config.redisUrl ? new RedisEventBus(config.redisUrl, log) : new LocalEventBus();
    const sync = new ClusterSync(store, revocations, bus, log);
    sync.start();
    const tokenProvider = createTokenProvider(config, store, log);
    tokenProvider.onReload(() => sync.invalidate());
    await tokenProvider.start();

    const pepper = loadPepper(config.secretPepper, path.join(config.dataDir, 'secret-pepper'));
    if (pepper.created) {
      log.info({ file: path.join(config.dataDir, 'secret-pepper') }, 'generated the application-credential pepper; nodes sharing a database must share SECRET_PEPPER');
    }
    const passwords = new PasswordHasher({ bcryptRounds: config.passwordHashRounds });
    const resources = new ResourceService(store, revocations, clock);
    const identity = new IdentityService(store, resources, passwords, revocations, clock);
    const assignments = new AssignmentService(store, identity, resources, revocations, sync);
    const applicationCredentials = new ApplicationCredentialService(store, identity, new SecretHasher(pepper.pepper, passwords), clock);
    const catalog = new CatalogService(store);
    const tokens = new TokenService(tokenProvider, store, identity, resources, assignments, applicationCredentials, revocations, clock, config.tokenExpiration, sync);
    const api: IdentityApi = {
      config,
      resources,
      identity,
      assignments,
      applicationCredentials,
      catalog,
      tokens,
      tokenProvider,
      revocations,
      authorizer: new InterimIdentityAuthorizer(),
    };
    const routes = registerIdentityApi(server, api);
    await server.ready();

    return {
      ...api,
      server,
      store,
      routes,
      async close() {
        tokenProvider.stop();
        await server.close();
        await sync.close();
        await store.close();
      },
    };
  } catch (error) {
    await store.close();
    throw error;
  }
}
