import type { CatalogService } from '../catalog/catalog-service.ts';
import type { InternalEndpoints } from '../catalog/internal-endpoints.ts';
import { ServiceCatalogHeaders } from '../catalog/service-catalog-header.ts';
import { systemClock, type Clock } from '../support/clock.ts';
import { ValidationError } from '../support/errors.ts';
import type { DecisionRecord, GatewayExplainer, GatewayExplainRequest, GatewayExplanation, GatewayReplay, GatewayReplayRequest, PolicySubject } from '../policy/gateway-explain.ts';
import { loadCandidate, replayDecisions } from '../policy/policy-replay.ts';
import type { TokenContext, TokenService } from '../token/token-service.ts';
import { GatewayAnswers } from './answers.ts';
import { Authenticator } from './authenticate.ts';
import { Authoriser, policySubject, type GatewayPolicyHolder } from './authorise.ts';
import { canonicalise, GATEWAY_METHODS, routeOf } from './canonicalise.ts';
import type { CircuitState } from './circuit-breaker.ts';
import type { ClientRequest, ClientResponse } from './client-exchange.ts';
import { Forwarding, type ForwardingOptions, type UpstreamErrorCounter } from './forward.ts';
import { asHeaderValue } from './identity-headers.ts';
import type { DecisionStore } from './decision-store.ts';
import { decisionOf, outcomeOf, refusedByGateway, type GatewayDecision, type Outcome, type Refusal } from './outcome.ts';
import { canonicalizeTarget } from './path.ts';
import { runStages, type Stage } from './pipeline.ts';
import { ProxiedRequest } from './proxied-request.ts';
import { PublicUrl } from './public-url.ts';
import { Resolver } from './resolve.ts';
import { UpstreamRequests } from './upstream-request.ts';

export interface GatewayOptions extends ForwardingOptions {
  publicUrl: string;
  publicUrlFixed: boolean;
  serviceTokenRoles: readonly string[];
  /** Send X-Service-Catalog (v2 shape) upstream, as keystonemiddleware does by default. */
  serviceCatalogHeader: boolean;
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

/** Receives one call per proxied request (on the hot path: must be a few increments) and per upstream failure. */
export interface GatewayInstruments extends UpstreamErrorCounter {
  /** `service` is a service type with an internal endpoint, or 'unknown' (client-chosen strings never become labels). */
  request(service: string, method: string, decision: GatewayDecision, status: number, seconds: number): void;
  /** A request the shadow policy decided otherwise than the live one. */
  shadowDisagreement?(service: string, live: 'allow' | 'deny', shadow: 'allow' | 'deny'): void;
}

/** Receives the refusals (401, 403) the gateway decides, as security events. */
export interface GatewayDenialSink {
  denied(request: ClientRequest, outcome: Readonly<Outcome>): void;
}

/**
 * The ingress for every platform service: {gateway}/{service_type}/{rest}. Each request passes the
 * stages in order — canonicalise → authenticate → resolve → authorise → forward — until one ends it;
 * when its response closes, its outcome makes one audit line, the metrics and any denial event.
 */
export class Gateway implements GatewayExplainer {
  private readonly stages: readonly Stage<ProxiedRequest, Refusal>[];
  private readonly authoriser: Authoriser;
  private readonly forwarding: Forwarding;
  private readonly answers: GatewayAnswers;
  private readonly instruments: GatewayInstruments | undefined;
  private readonly decisions: DecisionStore | undefined;

  constructor(
    private readonly tokens: TokenService,
    private readonly endpoints: InternalEndpoints,
    private readonly policy: GatewayPolicyHolder,
    catalog: CatalogService,
    options: GatewayOptions,
    private readonly log: Logger,
    generation: () => number,
    private readonly denials?: GatewayDenialSink,
    observers: { clock?: Clock; instruments?: GatewayInstruments; decisions?: DecisionStore } = {},
  ) {
    const publicUrl = new PublicUrl(options.publicUrl, options.publicUrlFixed);
    this.instruments = observers.instruments;
    this.decisions = observers.decisions;
    this.answers = new GatewayAnswers(publicUrl, log);
    const authenticator = new Authenticator(tokens, options.serviceTokenRoles);
    const resolver = new Resolver(endpoints, catalog);
    this.authoriser = new Authoriser(policy);
    this.forwarding = new Forwarding(
      options,
      new UpstreamRequests(publicUrl, options.trustedProxies ?? []),
      options.serviceCatalogHeader ? new ServiceCatalogHeaders(catalog, generation, asHeaderValue) : undefined,
      this.answers,
      publicUrl,
      observers.clock ?? systemClock,
      log,
      this.instruments,
    );
    this.stages = [
      canonicalise,
      (proxied) => authenticator.authenticate(proxied),
      (proxied) => resolver.resolve(proxied),
      (proxied) => this.authoriser.authorise(proxied),
      (proxied) => this.forwarding.forward(proxied),
    ];
  }

  /** Each upstream origin that has had a connection failure, with its circuit's state. */
  circuitStates(): Iterable<[origin: string, state: CircuitState]> {
    return this.forwarding.circuitStates();
  }

  /**
   * Answers one proxied request. Nothing is awaited on the common path (token in the validation
   * cache, endpoint table current, catalog header cached or off): the request goes to the upstream
   * in the same turn it arrived. `expectsContinue`: the client sent Expect: 100-continue (Node's
   * 'checkContinue'); 100 is sent only once the request is authenticated and allowed, so a refused
   * client never sends its body.
   */
  handle(request: ClientRequest, response: ClientResponse, expectsContinue = false): void {
    // X-OpenStack-Request-Id goes out with the upstream's headers (forward) or with ours (answers):
    // no setHeader() here, so writeHead keeps repeated upstream headers apart.
    const proxied = new ProxiedRequest(request, response, expectsContinue);
    // ('close' is emitted once: on() spares once()'s wrapper.)
    response.on('close', () => this.closed(proxied));
    try {
      const ending = runStages(this.stages, proxied);
      if (ending instanceof Promise) ending.then((refusal) => this.answer(proxied, refusal)).catch((error: unknown) => this.answers.fail(proxied, error));
      else this.answer(proxied, ending);
    } catch (error) {
      this.answers.fail(proxied, error);
    }
  }

  /**
   * What the gateway would decide for a request, without forwarding it: the same canonicalisation,
   * access-rule check and policy, plus every matching policy line. A token that does not validate is
   * "not found", as a subject token is on GET /v3/auth/tokens.
   */
  async explain(input: GatewayExplainRequest): Promise<GatewayExplanation> {
    const method = input.method.toUpperCase();
    if (!GATEWAY_METHODS.has(method)) throw new ValidationError(`Invalid method: ${input.method}.`);
    const route = routeOf(canonicalizeTarget(input.path));
    if (!route.serviceType) throw new ValidationError('Invalid request path: it names no service type.');
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
    const authorization = this.authoriser.decide(user, false, subject, route.serviceType, method, route.path);
    const { matches } = this.policy.current().explain({ service: route.serviceType, method, path: route.path, ...subject });
    return { service: route.serviceType, method, path: route.path, subject, ...authorization, matches };
  }

  /** The recorded decision of a proxied request (this node's, or any node's with Redis). */
  async decision(requestId: string): Promise<DecisionRecord | undefined> {
    return this.decisions?.find(requestId);
  }

  /** The recorded decisions (up to `limit`, newest first) decided again by the live policy with the candidate's files. */
  async replay(request: GatewayReplayRequest): Promise<GatewayReplay> {
    const candidate = await loadCandidate(this.policy.current().directory, request.files);
    return replayDecisions(candidate, (await this.decisions?.latest(request.limit)) ?? []);
  }

  async close(): Promise<void> {
    await this.forwarding.close();
  }

  /** A stage's refusal is answered here; undefined: the upstream answers (or its failure was). */
  private answer(proxied: ProxiedRequest, refusal: Refusal | undefined): void {
    if (refusal) this.answers.refuse(proxied, refusal);
  }

  /** The response closed: the outcome, read once, makes the audit line, the metrics and any denial event. */
  private closed(proxied: ProxiedRequest): void {
    const elapsed = performance.now() - proxied.started;
    const outcome = outcomeOf(proxied, proxied.response.statusCode, elapsed);
    this.log.info({ audit: outcome }, 'gateway');
    if (this.instruments) {
      const service = outcome.service !== undefined && this.endpoints.known(outcome.service) ? outcome.service : 'unknown';
      this.instruments.request(service, outcome.method, decisionOf(outcome), outcome.status, elapsed / 1000);
      if (outcome.shadow !== undefined) this.instruments.shadowDisagreement?.(service, outcome.effect!, outcome.shadow.effect);
    }
    this.decisions?.record(proxied, outcome);
    if (refusedByGateway(outcome)) this.denials?.denied(proxied.request, outcome);
  }
}
