import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { STATUS_CODES } from 'node:http';
import { GenerationCache } from '../support/cache.ts';
import type { CatalogService } from '../catalog/catalog-service.ts';
import { systemClock, type Clock } from '../support/clock.ts';
import { AuthenticationError, ForbiddenError, NotFoundError, ServiceError, UnavailableError, ValidationError } from '../support/errors.ts';
import { serviceErrorOf, statusOf } from '../http/errors.ts';
import { loggableError } from '../store/loggable-error.ts';
import type { GatewayExplainer, GatewayExplainRequest, GatewayExplanation, PolicySubject } from '../policy/gateway-explain.ts';
import type { GatewayPolicy } from '../policy/gateway-policy.ts';
import type { TokenContext, TokenService } from '../token/token-service.ts';
import { accessRulesAllow } from './access-rules.ts';
import { UpstreamCircuits, type Admission, type CircuitOptions, type CircuitState } from './circuit-breaker.ts';
import { networkMatcher, unmappedAddress } from '../support/network-matcher.ts';
import { Forwarder, type ForwarderOptions, type ForwardResult, type ForwardTarget } from './forwarder.ts';
import { asHeaderValue, forwardableHeaders, identityHeaderList } from './identity-headers.ts';
import { canonicalizeTarget, type CanonicalTarget } from './path.ts';
import { joinPath, type Upstream, type UpstreamDirectory } from './upstreams.ts';

export interface GatewayPolicyHolder {
  /** The policy in force; replaced as a whole on reload. */
  current(): Pick<GatewayPolicy, 'decide' | 'explain'>;
}

export interface GatewayOptions extends ForwarderOptions {
  publicUrl: string;
  publicUrlFixed: boolean;
  serviceTokenRoles: readonly string[];
  /** Send X-Service-Catalog (v2 shape) upstream, as keystonemiddleware does by default. */
  serviceCatalogHeader: boolean;
  /** Per-upstream circuit breaker (UPSTREAM_CIRCUIT_*). */
  circuit: CircuitOptions;
  /**
   * TRUSTED_PROXIES: addresses and CIDR blocks of the load balancers in front of us. Only a request
   * whose socket peer is one of them has its X-Forwarded-For chain kept (and extended) and its
   * X-Forwarded-Proto / X-Forwarded-Host believed; anyone else's are replaced.
   */
  trustedProxies?: readonly string[];
}

interface Logger {
  info(object: object, message: string): void;
  warn(object: object, message: string): void;
  error(object: object, message: string): void;
}

/** How a proxied request ended, for metrics: the gateway's own decision, else 'error' (400, 404, 405, 5xx before forwarding). */
export type GatewayDecision = 'allowed' | 'denied' | 'unauthenticated' | 'error';

export type UpstreamErrorKind = 'connect' | 'timeout' | 'circuit_open';

/** Receives one call per proxied request (on the hot path: must be a few increments) and per upstream failure. */
export interface GatewayInstruments {
  /** `service` is a service type with an internal endpoint, or 'unknown' (client-chosen strings never become labels). */
  request(service: string, method: string, decision: GatewayDecision, status: number, seconds: number): void;
  upstreamError(service: string, kind: UpstreamErrorKind): void;
}

/** Receives the refusals (401, 403) the gateway decides, as security events. */
export interface GatewayDenialSink {
  denied(request: IncomingMessage, audit: Readonly<AuditRecord>): void;
}

/** A Host header safe to build our public base URL from. */
const VALID_HOST = /^[A-Za-z0-9.\-:[\]]+$/;

const METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
const DENIED = 'You are not authorized to perform the requested action.';
const CIRCUIT_OPEN = 'The service behind the gateway is unavailable after repeated connection failures; retry later.';

/** One proxied request's audit record: never the token itself. */
export interface AuditRecord {
  request_id: string;
  audit_id?: string;
  user_id?: string;
  project_id?: string;
  service?: string;
  method: string;
  path: string;
  rule?: string;
  effect?: 'allow' | 'deny';
  upstream?: string;
  status?: number;
  latency_ms?: number;
  reason?: string;
}

/** A decision on a request whose token is already known; the access-rule check comes first. */
interface Authorization {
  allowed: boolean;
  reason: GatewayExplanation['reason'];
  rule?: string;
  source?: string;
  line?: number;
}

/** A request whose token validated: what each later step needs. */
interface Caller {
  request: IncomingMessage;
  response: ServerResponse;
  audit: AuditRecord;
  target: CanonicalTarget;
  user: TokenContext;
  service: TokenContext | undefined;
  /** The client sent Expect: 100-continue and waits for 100 before its body. */
  expectsContinue: boolean;
  /** The service token carries a SERVICE_TOKEN_ROLES role: only then are access rules waived. */
  privilegedService: boolean;
}

/** A request the policy allowed, on its way to the upstream. */
interface Forwarding extends Caller {
  upstream: Upstream;
  serviceType: string;
  rest: { path: string; encodedPath: string };
  admission: Admission;
}

/**
 * The ingress for every platform service: {gateway}/{service_type}/{rest}. Canonicalise the path once
 * → validate the token in process → find the internal endpoint → decide policy on the canonical path
 * → replace identity headers → stream to the upstream → one audit line.
 */
export class Gateway implements GatewayExplainer {
  private readonly forwarder: Forwarder;
  private readonly catalogHeaders: GenerationCache<string, string>;
  private readonly identityHeaderCache = new WeakMap<TokenContext, string[]>();
  private readonly subjectCache = new WeakMap<TokenContext, PolicySubject>();
  private readonly circuits: UpstreamCircuits;
  private readonly instruments: GatewayInstruments | undefined;
  private readonly isTrustedProxy: (address: string) => boolean;
  private readonly publicUrlIsHttps: boolean;

  constructor(
    private readonly tokens: TokenService,
    private readonly upstreams: UpstreamDirectory,
    private readonly policy: GatewayPolicyHolder,
    private readonly catalog: CatalogService,
    private readonly options: GatewayOptions,
    private readonly log: Logger,
    generation: () => number,
    private readonly denials?: GatewayDenialSink,
    observers: { clock?: Clock; instruments?: GatewayInstruments } = {},
  ) {
    this.forwarder = new Forwarder(options);
    this.catalogHeaders = new GenerationCache(10_000, generation);
    this.circuits = new UpstreamCircuits(options.circuit, observers.clock ?? systemClock, log);
    this.instruments = observers.instruments;
    this.isTrustedProxy = networkMatcher(options.trustedProxies ?? []);
    this.publicUrlIsHttps = options.publicUrl.startsWith('https:');
  }

  /** Each upstream origin that has had a connection failure, with its circuit's state. */
  circuitStates(): Iterable<[origin: string, state: CircuitState]> {
    return this.circuits.states();
  }

  /**
   * Answers one proxied request. Nothing is awaited on the common path (token in the validation
   * cache, endpoint table current): the request goes to the upstream in the same turn it arrived.
   * `expectsContinue`: the client sent Expect: 100-continue (Node's 'checkContinue'); 100 is sent
   * only once the request is authenticated and allowed, so a refused client never sends its body.
   */
  handle(request: IncomingMessage, response: ServerResponse, expectsContinue = false): void {
    const started = performance.now();
    const requestId = `req-${randomUUID()}`;
    // X-OpenStack-Request-Id goes out with the upstream's headers (forwardTo) or with ours (fail):
    // no setHeader() here, so writeHead keeps repeated upstream headers apart.
    const audit: AuditRecord = { request_id: requestId, method: request.method ?? '', path: '' };
    // ('close' is emitted once: on() spares once()'s wrapper.)
    response.on('close', () => {
      const elapsed = performance.now() - started;
      audit.status = response.statusCode;
      audit.latency_ms = Math.round(elapsed * 1000) / 1000;
      this.log.info({ audit }, 'gateway');
      if (this.instruments) {
        const service = audit.service !== undefined && this.upstreams.known(audit.service) ? audit.service : 'unknown';
        const decision: GatewayDecision =
          audit.effect === 'allow' ? 'allowed' : audit.effect === 'deny' ? 'denied' : audit.status === 401 ? 'unauthenticated' : 'error';
        this.instruments.request(service, audit.method, decision, audit.status, elapsed / 1000);
      }
      // A 401 with no policy decision, or a policy deny; a 401 or 403 of the service is not ours.
      if (audit.effect === 'deny' || (audit.effect === undefined && audit.status === 401)) this.denials?.denied(request, audit);
    });
    try {
      const pending = this.proxy(request, response, audit, expectsContinue);
      if (pending) pending.catch((error: unknown) => this.failWithError(request, response, audit, error));
    } catch (error) {
      this.failWithError(request, response, audit, error);
    }
  }

  /** Domain errors as their status, database failures as 503, anything else as a logged 500. */
  private failWithError(request: IncomingMessage, response: ServerResponse, audit: AuditRecord, error: unknown): void {
    const known = serviceErrorOf(error);
    if (known) {
      audit.reason ??= known.message;
      if (known instanceof UnavailableError && known.retryAfterSeconds !== undefined && !response.headersSent) {
        response.setHeader('Retry-After', String(known.retryAfterSeconds));
      }
      this.fail(request, response, audit.request_id, statusOf(known), known.message);
      return;
    }
    audit.reason = 'internal error';
    this.log.error({ err: loggableError(error), request_id: audit.request_id }, 'gateway failure');
    this.fail(request, response, audit.request_id, 500, 'An unexpected error prevented the server from fulfilling your request.');
  }

  /**
   * What the gateway would decide for a request, without forwarding it: the same canonicalisation,
   * access-rule check and policy, plus every matching policy line. A token that does not validate is
   * "not found", as a subject token is on GET /v3/auth/tokens.
   */
  async explain(input: GatewayExplainRequest): Promise<GatewayExplanation> {
    const method = input.method.toUpperCase();
    if (!METHODS.has(method)) throw new ValidationError(`Invalid method: ${input.method}.`);
    const target = canonicalizeTarget(input.path);
    const serviceType = target.segments[0];
    if (!serviceType) throw new ValidationError('Invalid request path: it names no service type.');
    const rest = restOf(target);
    let user: TokenContext | undefined;
    let subject: PolicySubject;
    if (input.token !== undefined) {
      user = await this.tokens.validate(input.token);
      if (user.scope.type === 'unscoped') throw new ValidationError('The token is unscoped: the gateway refuses it (401) before any policy runs.');
      subject = policySubject(user);
    } else if (input.subject) {
      subject = input.subject;
    } else {
      throw ValidationError.expecting('token or roles and scope', 'explain');
    }
    const authorization = this.authorize(user, false, subject, serviceType, method, rest.path);
    const { matches } = this.policy.current().explain({ service: serviceType, method, path: rest.path, ...subject });
    return { service: serviceType, method, path: rest.path, subject, ...authorization, matches };
  }

  async close(): Promise<void> {
    await this.forwarder.close();
  }

  /**
   * Each step below returns a promise only when it had to wait (a token not in the validation cache,
   * an endpoint table to read, the catalog header to build); errors thrown are answered by handle().
   */
  private proxy(request: IncomingMessage, response: ServerResponse, audit: AuditRecord, expectsContinue: boolean): Promise<void> | undefined {
    const method = request.method ?? '';
    if (!METHODS.has(method)) {
      response.setHeader('Allow', [...METHODS].join(', '));
      audit.reason = 'method not allowed';
      this.fail(request, response, audit.request_id, 405, 'The method is not allowed for the requested URL.');
      return undefined;
    }
    const target = canonicalizeTarget(request.url ?? '');
    audit.service = target.segments[0]!;
    audit.path = target.path;

    const userToken = header(request, 'x-auth-token');
    if (!userToken) return this.unauthorized(request, response, audit, 'no token');
    const serviceToken = header(request, 'x-service-token');
    const cached = serviceToken === undefined ? this.tokens.validateCached(userToken) : undefined;
    if (cached) return this.proxyAs({ request, response, audit, target, user: cached, service: undefined, expectsContinue, privilegedService: false });
    return this.validateThenProxy(request, response, audit, target, userToken, serviceToken, expectsContinue);
  }

  private async validateThenProxy(
    request: IncomingMessage,
    response: ServerResponse,
    audit: AuditRecord,
    target: CanonicalTarget,
    userToken: string,
    serviceToken: string | undefined,
    expectsContinue: boolean,
  ): Promise<void> {
    let user: TokenContext;
    let service: TokenContext | undefined;
    let privilegedService = false;
    try {
      // Without a service token validateWithServiceToken() is validate(): one async step fewer.
      if (serviceToken === undefined) user = await this.tokens.validate(userToken);
      else ({ user, service, privileged: privilegedService } = await this.tokens.validateWithServiceToken(userToken, serviceToken, this.options.serviceTokenRoles));
    } catch (error) {
      if (error instanceof ServiceError && !(error instanceof ValidationError) && error.kind !== 'unavailable') {
        return this.unauthorized(request, response, audit, 'invalid token');
      }
      throw error;
    }
    return this.proxyAs({ request, response, audit, target, user, service, expectsContinue, privilegedService });
  }

  private proxyAs(caller: Caller): Promise<void> | undefined {
    const { request, response, audit, target, user } = caller;
    audit.audit_id = user.auditIds[0];
    audit.user_id = user.user.id;
    if (user.scope.type === 'project') audit.project_id = user.scope.project.id;
    if (user.scope.type === 'unscoped') return this.unauthorized(request, response, audit, 'unscoped token');

    const serviceType = target.segments[0]!;
    const upstream = this.upstreams.resolveCached(serviceType);
    if (upstream) return this.authorizeAndForward(caller, upstream);
    return this.upstreams.resolve(serviceType).then((resolved) => {
      if (!resolved) {
        audit.reason = 'no internal endpoint';
        throw new NotFoundError(`Could not find an internal endpoint for service type: ${serviceType}.`);
      }
      return this.authorizeAndForward(caller, resolved);
    });
  }

  private authorizeAndForward(caller: Caller, upstream: Upstream): Promise<void> | undefined {
    const { request, response, audit, target, user, privilegedService } = caller;
    const serviceType = target.segments[0]!;
    const rest = restOf(target);
    audit.upstream = upstream.origin;

    const authorization = this.authorize(user, privilegedService, this.subjectOf(user), serviceType, request.method!, rest.path);
    audit.effect = authorization.allowed ? 'allow' : 'deny';
    if (authorization.rule) audit.rule = authorization.rule;
    if (!authorization.allowed) {
      audit.reason = authorization.reason;
      throw new ForbiddenError(DENIED);
    }

    // After policy: a caller who may not use the service learns nothing of its health.
    const admission = this.circuits.admit(upstream.origin);
    if (!admission.admitted) {
      audit.reason = 'upstream circuit open';
      this.instruments?.upstreamError(serviceType, 'circuit_open');
      response.setHeader('Retry-After', String(admission.retryAfterSeconds));
      this.fail(request, response, audit.request_id, 502, CIRCUIT_OPEN);
      return undefined;
    }
    const forwarding: Forwarding = { ...caller, upstream, serviceType, rest, admission };
    if (!this.options.serviceCatalogHeader) {
      this.forwardTo(forwarding, undefined);
      return undefined;
    }
    return this.catalogHeader(user).then(
      (catalogHeader) => this.forwardTo(forwarding, catalogHeader),
      (error: unknown) => {
        // A trial that failed before learning anything must not hold the half-open circuit forever.
        this.circuits.released(upstream.origin, admission);
        throw error;
      },
    );
  }

  /** The upstream's answer (or failure) is known: circuit accounting, and our error response if any. */
  private forwarded(forwarding: Forwarding, result: ForwardResult): void {
    const { request, response, audit, upstream, serviceType, admission } = forwarding;
    if (!result.failure) {
      this.circuits.succeeded(upstream.origin, admission);
      return;
    }
    audit.reason = `upstream ${result.failure.kind}: ${result.failure.detail}`;
    if (result.failure.kind === 'aborted') this.circuits.released(upstream.origin, admission);
    else {
      this.circuits.failed(upstream.origin, admission, audit.reason);
      this.instruments?.upstreamError(serviceType, result.failure.kind);
    }
    if (result.failure.kind === 'timeout') this.fail(request, response, audit.request_id, 504, 'The service behind the gateway did not answer in time.');
    else this.fail(request, response, audit.request_id, 502, 'The service behind the gateway could not be reached.');
  }

  private forwardTo(forwarding: Forwarding, catalogHeader: string | undefined): void {
    const { request, response, audit, upstream, serviceType, rest, admission } = forwarding;
    try {
      const target = this.upstreamRequest(forwarding, catalogHeader);
      // Authenticated, allowed, admitted: now the client may send its body.
      if (forwarding.expectsContinue) response.writeContinue();
      this.forwarder.forward(
        request,
        response,
        target,
        (location) => rewriteLocation(location, upstream, rest.encodedPath, `${this.publicBase(request)}/${encodeURIComponent(serviceType)}`),
        (result) => this.forwarded(forwarding, result),
        (error) => {
          this.circuits.released(upstream.origin, admission);
          this.failWithError(request, response, audit, error);
        },
      );
    } catch (error) {
      // A trial that threw before learning anything must not hold the half-open circuit forever.
      this.circuits.released(upstream.origin, admission);
      throw error;
    }
  }

  /** What the upstream receives: the canonical path, the client's headers minus forgeable ones, ours. */
  private upstreamRequest(forwarding: Forwarding, catalogHeader: string | undefined): ForwardTarget {
    const { request, audit, upstream, target, rest, user, service } = forwarding;
    const headers = forwardableHeaders(request.headers);
    const identity = this.identityHeadersOf(user, service);
    for (let index = 0; index < identity.length; index++) headers.push(identity[index]!);
    if (catalogHeader !== undefined) headers.push('x-service-catalog', catalogHeader);
    const host = header(request, 'host');
    const peer = unmappedAddress(request.socket.remoteAddress ?? '');
    if (this.isTrustedProxy(peer)) {
      // Behind our own load balancer: its chain is kept and extended, its scheme, host and port
      // believed. (Its Forwarded is dropped all the same: see BELIEVED_HEADER_FAMILIES.)
      const chain = header(request, 'x-forwarded-for');
      headers.push(
        'x-forwarded-for',
        chain ? `${chain}, ${peer}` : peer,
        'x-forwarded-proto',
        header(request, 'x-forwarded-proto') ?? this.forwardedProto(host),
        'x-forwarded-host',
        header(request, 'x-forwarded-host') ?? host ?? '',
      );
      const port = header(request, 'x-forwarded-port');
      if (port !== undefined) headers.push('x-forwarded-port', port);
    } else {
      // Anyone else: whatever the client wrote is replaced (forwardableHeaders dropped it).
      headers.push('x-forwarded-for', peer, 'x-forwarded-proto', this.forwardedProto(host), 'x-forwarded-host', host ?? '');
    }
    headers.push('host', upstream.host, 'x-openstack-request-id', audit.request_id);
    const path = joinPath(upstream, rest.encodedPath) + (target.query ? `?${target.query}` : '');
    return { origin: upstream.origin, path, headers, responseHeaders: ['x-openstack-request-id', audit.request_id] };
  }

  /** The scheme of publicBase(request), without building it. */
  private forwardedProto(host: string | undefined): 'http' | 'https' {
    if (!this.publicUrlIsHttps) return 'http';
    if (this.options.publicUrlFixed) return 'https';
    return host && VALID_HOST.test(host) ? 'http' : 'https';
  }

  /**
   * Application-credential access rules first, then the policy of the service. keystonemiddleware
   * waives access rules whenever a valid service token comes along; here only for a service token
   * with a SERVICE_TOKEN_ROLES role: we are the public ingress, where anyone may add X-Service-Token,
   * and any other token of one's own must not lift a leaked credential's restrictions.
   */
  private authorize(
    user: TokenContext | undefined,
    privilegedService: boolean,
    subject: PolicySubject,
    serviceType: string,
    method: string,
    path: string,
  ): Authorization {
    const accessRules = user?.applicationCredential?.accessRules ?? [];
    if (accessRules.length > 0 && !privilegedService && !accessRulesAllow(accessRules, serviceType, method, path)) {
      return { allowed: false, reason: 'application credential access rules' };
    }
    const decision = this.policy.current().decide({ service: serviceType, method, path, ...subject });
    const authorization: Authorization = { allowed: decision.allowed, reason: decision.reason };
    if (decision.rule !== undefined) Object.assign(authorization, { rule: decision.rule, source: decision.source, line: decision.line });
    return authorization;
  }

  /** A validated token's policy subject, built once (the roles array is the policy's memo key too). */
  private subjectOf(user: TokenContext): PolicySubject {
    let subject = this.subjectCache.get(user);
    if (!subject) {
      subject = policySubject(user);
      this.subjectCache.set(user, subject);
    }
    return subject;
  }

  /** A validated token's identity headers, built once: the validation cache hands back the same context. */
  private identityHeadersOf(user: TokenContext, service: TokenContext | undefined): string[] {
    if (service) return identityHeaderList(user, service);
    let headers = this.identityHeaderCache.get(user);
    if (!headers) {
      headers = identityHeaderList(user, undefined);
      this.identityHeaderCache.set(user, headers);
    }
    return headers;
  }

  private unauthorized(request: IncomingMessage, response: ServerResponse, audit: AuditRecord, reason: string): undefined {
    audit.reason = reason;
    this.fail(request, response, audit.request_id, 401, AuthenticationError.GENERIC);
    return undefined;
  }

  private fail(request: IncomingMessage, response: ServerResponse, requestId: string, status: number, message: string): void {
    if (response.headersSent || response.destroyed) {
      // Too late for an error body: the client sees the connection cut; audit and metrics the status.
      if (!response.headersSent) response.statusCode = status;
      response.destroy();
      return;
    }
    const body = JSON.stringify({ error: { code: status, title: STATUS_CODES[status] ?? 'Error', message } });
    response.statusCode = status;
    response.setHeader('x-openstack-request-id', requestId);
    if (status === 401) response.setHeader('WWW-Authenticate', `Keystone uri="${this.publicBase(request)}/v3"`);
    response.setHeader('Content-Type', 'application/json');
    response.setHeader('Content-Length', Buffer.byteLength(body));
    // The request body is not read: close the connection rather than leave it to be misparsed.
    if (!request.complete) response.setHeader('Connection', 'close');
    response.end(request.method === 'HEAD' ? undefined : body);
  }

  private publicBase(request: IncomingMessage): string {
    if (this.options.publicUrlFixed) return this.options.publicUrl;
    const host = header(request, 'host');
    return host && VALID_HOST.test(host) ? `http://${host}` : this.options.publicUrl;
  }

  /** keystonemiddleware's X-Service-Catalog: the token's catalog in the v2 shape, per project. */
  private async catalogHeader(user: TokenContext): Promise<string> {
    const projectId = user.scope.type === 'project' ? user.scope.project.id : '';
    const cached = this.catalogHeaders.get(projectId);
    if (cached !== undefined) return cached;
    const generation = this.catalogHeaders.generation();
    const entries = await this.catalog.catalog({ projectId: projectId || undefined, userId: user.user.id });
    const v2 = entries.map(({ service, endpoints }) => {
      const byRegion = new Map<string, Record<string, string>>();
      for (const endpoint of endpoints) {
        const region = endpoint.regionId ?? '';
        const entry = byRegion.get(region) ?? { region };
        entry[`${endpoint.interface}URL`] = endpoint.url;
        byRegion.set(region, entry);
      }
      return { type: service.type, name: service.name, endpoints: [...byRegion.values()] };
    });
    const value = asHeaderValue(JSON.stringify(v2));
    this.catalogHeaders.set(projectId, value, generation);
    return value;
  }
}

/** The policy subject of a scoped token (an unscoped one is refused before policy runs). */
export function policySubject(user: TokenContext): PolicySubject {
  if (user.scope.type === 'unscoped') throw new AuthenticationError();
  return {
    roles: user.roles.map((role) => role.name),
    scope: user.scope.type,
    ...(user.scope.type === 'project' ? { projectId: user.scope.project.id } : {}),
    userId: user.user.id,
  };
}

function header(request: IncomingMessage, name: string): string | undefined {
  const value = request.headers[name];
  return typeof value === 'string' && value.length > 0 ? value : undefined;
}

/**
 * The canonical path after /{service_type}: decoded for policy, encoded for forwarding. A decoded
 * segment never contains '/' (canonicalizeTarget refuses it), so the first '/' after the leading one
 * ends the service type in both forms.
 */
function restOf(target: CanonicalTarget): { path: string; encodedPath: string } {
  const prefixEnd = target.path.indexOf('/', 1);
  const encodedPrefixEnd = target.encodedPath.indexOf('/', 1);
  return {
    path: prefixEnd === -1 ? '/' : target.path.slice(prefixEnd),
    encodedPath: encodedPrefixEnd === -1 ? '/' : target.encodedPath.slice(encodedPrefixEnd),
  };
}

/** Absolute or path-only Location headers that point at the upstream point at the gateway instead. */
export function rewriteLocation(location: string, upstream: Upstream, encodedRest: string, publicServiceBase: string): string {
  const prepended = upstream.basePath && joinPath(upstream, encodedRest) !== encodedRest ? upstream.basePath : '';
  let upstreamPath: string;
  if (location.startsWith(upstream.origin + '/') || location === upstream.origin) {
    upstreamPath = location.slice(upstream.origin.length) || '/';
  } else if (location.startsWith('/') && !location.startsWith('//')) {
    upstreamPath = location;
  } else {
    return location;
  }
  if (prepended && (upstreamPath === prepended || upstreamPath.startsWith(`${prepended}/`) || upstreamPath.startsWith(`${prepended}?`))) {
    upstreamPath = upstreamPath.slice(prepended.length) || '/';
  }
  return publicServiceBase + upstreamPath;
}
