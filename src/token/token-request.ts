import type { ApplicationCredentialReference } from '../identity/application-credential-service.ts';
import type { UserReference } from '../identity/identity-service.ts';
import type { SignedRequest } from '../oauth1/oauth1-service.ts';
import { AuthenticationError, NotFoundError, ValidationError } from '../support/errors.ts';

/**
 * Keystone's auth methods that load its mapped plugin (keystone/auth/plugins/mapped.py): a protocol
 * id is the method's name (Keystone's [auth] methods with mapped, openid, saml2).
 */
export const MAPPED_METHODS: readonly string[] = ['mapped', 'openid', 'saml2'];

/** Methods this service can run; the rest of Keystone's are known to it but not offered. */
export const ENABLED_AUTH_METHODS = ['password', 'token', 'application_credential', 'oauth1', 'totp', ...MAPPED_METHODS];

// ---- as sent ----------------------------------------------------------------------------------

export interface NameOrId {
  id?: string | undefined;
  name?: string | undefined;
}

/**
 * A token request as sent: `auth.identity` of POST /v3/auth/tokens with `auth.scope` beside its
 * methods. The route's schema has typed its leaves; nothing else is checked yet (the login throttle
 * counts what it names before that).
 */
export interface AuthRequest {
  methods: string[];
  password?: { user?: (NameOrId & { domain?: NameOrId | undefined; password?: string | undefined }) | undefined } | undefined;
  token?: { id?: string | undefined } | undefined;
  /** A TOTP passcode of the user (checked as a string, as Keystone compares it). */
  totp?: { user?: (NameOrId & { domain?: NameOrId | undefined; passcode?: unknown }) | undefined } | undefined;
  application_credential?:
    | {
        id?: string | undefined;
        name?: string | undefined;
        secret?: string | undefined;
        user?: (NameOrId & { domain?: NameOrId | undefined }) | undefined;
      }
    | undefined;
  /** 'unscoped' (or {unscoped: {}}), or an object with one of project/domain/system. */
  scope?: unknown;
  /** The oauth1 method's body ({}): the request's OAuth signature is what authenticates. */
  oauth1?: object | undefined;
  /** The request as signed (its URL and Authorization header), for the oauth1 method. */
  signedRequest?: SignedRequest | undefined;
  /**
   * The request's headers (names lower-cased), for a mapped method without a token id: only the
   * protocol's verifier reads them (an OIDC bearer token), never as claims themselves.
   */
  requestHeaders?: Readonly<Record<string, string | string[] | undefined>> | undefined;
}

// ---- checked ----------------------------------------------------------------------------------

/** A domain named by id, or by name. */
export type DomainReference = { id: string } | { name: string };

/** What a token is asked to be scoped to. */
export type ScopeRequest =
  /** Nothing asked: the user's default project when the user may use it, else unscoped. */
  | { type: 'default' }
  | { type: 'unscoped' }
  | { type: 'system' }
  | { type: 'domain'; domain: DomainReference }
  | { type: 'project'; project: { id: string } | { name: string; domain: DomainReference } }
  /** OS-TRUST:trust: a trust's project, as its trustee. */
  | { type: 'trust'; trustId: string };

/**
 * A mapped method (Keystone's mapped plugin under the protocol's name): with `id`, a federated token
 * whose groups, provider and protocol make the new token (handle_scoped_token); without, a login
 * at the provider and protocol named, from what the protocol's verifier proves of the request
 * (handle_unscoped_token, which in Keystone reads the web server's environment).
 */
export type MappedRequest =
  | { method: string; tokenId: string }
  | { method: string; identityProviderId: string; protocolId: string; headers: Readonly<Record<string, string | string[] | undefined>> };

/** A checked token request: what the token service takes. */
export type TokenRequest =
  /** OS-OAUTH1: a request signed by a consumer and an access token; scoped to the access token's project. */
  | { method: 'oauth1'; signed: SignedRequest }
  /** An application credential's secret; never a scope (the credential's project is the scope). */
  | { method: 'application_credential'; credential: ApplicationCredentialReference; secret: string }
  /** A password, a token to re-scope, or both (then for the same user). */
  | {
      method: 'user';
      /** As asked (the token's methods are these and the re-scoped token's). */
      methods: string[];
      password?: { user: UserReference; password: string };
      totp?: { user: UserReference; passcode: unknown };
      token?: { id: string };
      mapped?: MappedRequest;
      scope: ScopeRequest;
    };

/**
 * Checks a token request as sent and says what it asks for, or throws Keystone's answer: its
 * messages, in its order (400 for a malformed request, 401 for a method or a combination this
 * service does not offer).
 */
export function parseTokenRequest(request: AuthRequest): TokenRequest {
  const { methods } = request;
  if (methods.length === 0) throw ValidationError.expecting('methods', 'identity');
  const passwordUser = request.password?.user;
  if (methods.includes('password') && passwordUser) {
    if (!passwordUser.id && !passwordUser.name) {
      throw ValidationError.idOrName('identity/password/user');
    }
    if (passwordUser.domain && !passwordUser.domain.id && !passwordUser.domain.name) {
      throw ValidationError.idOrName('identity/password/user/domain');
    }
  }
  // Each method's own object must be there (any key of the request counts, as in Keystone).
  for (const method of methods) {
    if ((request as unknown as Record<string, unknown>)[method] === undefined) throw ValidationError.expecting(method, 'identity');
  }
  for (const method of methods) {
    if (!ENABLED_AUTH_METHODS.includes(method)) {
      throw new AuthenticationError('Attempted to authenticate with an unsupported method.', { methods: ENABLED_AUTH_METHODS });
    }
  }
  const scope = parseScope(request.scope);
  let password: { user: UserReference; password: string } | undefined;
  if (methods.includes('password')) {
    if (!passwordUser) throw ValidationError.expecting('user', 'password');
    if (!passwordUser.id && !passwordUser.domain) throw ValidationError.expecting('domain', 'user');
    if (passwordUser.password === undefined) throw ValidationError.expecting('password', 'user');
    password = { user: userReference(passwordUser), password: passwordUser.password };
  }
  const totp = methods.includes('totp') ? parseTotp(request) : undefined;
  const tokenId = request.token?.id;
  if (methods.includes('token') && !tokenId) throw ValidationError.expecting('id', 'token');
  const mapped = parseMapped(request);
  if (methods.includes('application_credential')) return parseApplicationCredential(request);
  if (methods.includes('oauth1')) {
    if (methods.length !== 1 || !request.signedRequest) throw new AuthenticationError();
    return { method: 'oauth1', signed: request.signedRequest };
  }
  return {
    method: 'user',
    methods,
    ...(password ? { password } : {}),
    ...(totp ? { totp } : {}),
    ...(tokenId && methods.includes('token') ? { token: { id: tokenId } } : {}),
    ...(mapped ? { mapped } : {}),
    scope,
  };
}

/**
 * The mapped method (Keystone's Mapped.authenticate): `{"<method>": {"id": "<token>"}}`, or
 * `{"<method>": {"identity_provider": …, "protocol": …}}` (400 "Expecting to find identity_provider
 * in mapped" without one, Keystone's target being always `mapped`). One mapped method per request
 * (two could only name the same user, as Keystone's AuthContext requires): else the generic 401.
 */
function parseMapped(request: AuthRequest): MappedRequest | undefined {
  const named = request.methods.filter((method) => MAPPED_METHODS.includes(method));
  if (named.length === 0) return undefined;
  if (new Set(named).size > 1) throw new AuthenticationError();
  const method = named[0]!;
  const body = objectOrEmpty((request as unknown as Record<string, unknown>)[method]);
  if ('id' in body) {
    // Keystone validates whatever `id` holds: anything but a token string is no token (404).
    if (typeof body.id !== 'string' || !body.id) throw NotFoundError.tokenNotValidated();
    return { method, tokenId: body.id };
  }
  if (body.identity_provider === undefined) throw ValidationError.expecting('identity_provider', 'mapped');
  if (body.protocol === undefined) throw ValidationError.expecting('protocol', 'mapped');
  if (typeof body.identity_provider !== 'string' || typeof body.protocol !== 'string') throw new AuthenticationError();
  return { method, identityProviderId: body.identity_provider, protocolId: body.protocol, headers: request.requestHeaders ?? {} };
}

/** The totp method: a user (by id, or by name in a domain) and a passcode (Keystone's TOTPUserInfo checks). */
function parseTotp(request: AuthRequest): { user: UserReference; passcode: unknown } {
  const user = request.totp?.user;
  if (!user || typeof user !== 'object') throw ValidationError.expecting('user', 'totp');
  if (!user.id && !user.name) throw ValidationError.expecting('id or name', 'user');
  if (!user.id && !user.domain?.id && !user.domain?.name) throw ValidationError.expecting('domain', 'user');
  return { user: userReference(user), passcode: user.passcode };
}

/** The application_credential method: alone, unscoped, the credential by id or by name and user. */
function parseApplicationCredential(request: AuthRequest): TokenRequest {
  if (request.methods.length !== 1) throw new AuthenticationError();
  if (request.scope !== undefined) {
    throw new AuthenticationError('Error authenticating with application credential: Application credentials cannot request a scope.', {});
  }
  const body = request.application_credential!;
  if (!body.id && !body.name) {
    throw ValidationError.idOrName('identity/application_credential');
  }
  if (body.secret === undefined) throw ValidationError.expecting('secret', 'application_credential');
  if (body.id) return { method: 'application_credential', credential: { id: body.id }, secret: body.secret };
  const user = body.user;
  if (!user || (!user.id && !user.name)) throw ValidationError.expecting('user', 'application_credential');
  if (!user.id && !user.domain?.id && !user.domain?.name) throw ValidationError.expecting('domain', 'user');
  return { method: 'application_credential', credential: { name: body.name!, user: userReference(user) }, secret: body.secret };
}

/** A user named by id, or by name in a domain named by id or by name (the checks above ensured one). */
function userReference(user: NameOrId & { domain?: NameOrId | undefined }): UserReference {
  if (user.id) return { id: user.id };
  return user.domain!.id ? { name: user.name!, domainId: user.domain!.id } : { name: user.name!, domainName: user.domain!.name! };
}

const SCOPE_FORMS = 'system, project, domain, OS-TRUST:trust or unscoped';

function parseScope(scope: unknown): ScopeRequest {
  if (scope === undefined || scope === null) return { type: 'default' };
  if (scope === 'unscoped') return { type: 'unscoped' };
  if (typeof scope !== 'object' || Array.isArray(scope)) throw ValidationError.expecting(SCOPE_FORMS, 'scope');
  const keys = Object.keys(scope);
  if (keys.length === 0) return { type: 'default' };
  if (keys.length > 1) throw ValidationError.expecting(SCOPE_FORMS, 'scope');
  const key = keys[0]!;
  const object = objectOrEmpty((scope as Record<string, unknown>)[key]);
  switch (key) {
    case 'unscoped':
      return { type: 'unscoped' };
    case 'system':
      if (object.all !== true) throw ValidationError.expecting('all', 'system');
      return { type: 'system' };
    case 'domain': {
      const domain = nameOrId(object);
      if (!domain) throw ValidationError.idOrName('scope/domain');
      return { type: 'domain', domain };
    }
    case 'project': {
      const id = text(object.id);
      const name = text(object.name);
      if (!id && !name) throw ValidationError.idOrName('scope/project');
      if (id) return { type: 'project', project: { id } };
      if (!object.domain || typeof object.domain !== 'object') throw ValidationError.expecting('domain', 'project');
      const domain = nameOrId(object.domain as Record<string, unknown>);
      if (!domain) throw ValidationError.idOrName('scope/project/domain');
      return { type: 'project', project: { name: name!, domain } };
    }
    case 'OS-TRUST:trust': {
      const id = text(object.id);
      if (!id) throw ValidationError.expecting('trust_id', 'trust');
      return { type: 'trust', trustId: id };
    }
    default:
      throw ValidationError.expecting(SCOPE_FORMS, 'scope');
  }
}

function objectOrEmpty(value: unknown): Record<string, unknown> {
  return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

/** A non-empty string, else nothing (the scope is not typed by the route's schema). */
function text(value: unknown): string | undefined {
  return typeof value === 'string' && value ? value : undefined;
}

/** By id when it has one, else by name; neither: undefined. */
function nameOrId(object: Record<string, unknown>): DomainReference | undefined {
  const id = text(object.id);
  if (id) return { id };
  const name = text(object.name);
  return name ? { name } : undefined;
}
