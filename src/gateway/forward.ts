import type { ServiceCatalogHeaders } from '../catalog/service-catalog-header.ts';
import type { Clock } from '../support/clock.ts';
import type { GatewayAnswers } from './answers.ts';
import { UpstreamCircuits, type CircuitOptions, type CircuitState } from './circuit-breaker.ts';
import { Forwarder, type ForwarderOptions, type ForwardResult } from './forwarder.ts';
import { Refusal } from './outcome.ts';
import { then, type Step } from './pipeline.ts';
import type { ProxiedRequest } from './proxied-request.ts';
import type { PublicUrl } from './public-url.ts';
import { rewriteLocation } from './upstream-paths.ts';
import type { UpstreamRequests } from './upstream-request.ts';

export type UpstreamErrorKind = 'connect' | 'timeout' | 'busy' | 'circuit_open';

/** Counts upstream failures by service (on the failure path only). */
export interface UpstreamErrorCounter {
  upstreamError(service: string, kind: UpstreamErrorKind): void;
}

interface CircuitLog {
  info(object: object, message: string): void;
  warn(object: object, message: string): void;
}

export interface ForwardingOptions extends ForwarderOptions {
  /** Per-upstream circuit breaker (UPSTREAM_CIRCUIT_*). */
  circuit: CircuitOptions;
}

const CIRCUIT_OPEN = 'The service behind the gateway is unavailable after repeated connection failures; retry later.';
const TIMED_OUT = 'The service behind the gateway did not answer in time.';
const UNREACHABLE = 'The service behind the gateway could not be reached.';

/**
 * Stage 5: through the upstream's circuit breaker to the upstream, streaming both ways; its answer
 * goes to the client as it comes, its failure as 502 (504 for a timeout). Each admitted request's
 * end, however it comes, reaches its circuit once, through ended().
 */
export class Forwarding {
  private readonly forwarder: Forwarder;
  private readonly circuits: UpstreamCircuits;

  constructor(
    options: ForwardingOptions,
    private readonly upstreamRequests: UpstreamRequests,
    /** Present when X-Service-Catalog is sent upstream (GATEWAY_SERVICE_CATALOG_HEADER). */
    private readonly catalogHeaders: ServiceCatalogHeaders | undefined,
    private readonly answers: GatewayAnswers,
    private readonly publicUrl: PublicUrl,
    clock: Clock,
    log: CircuitLog,
    private readonly instruments: UpstreamErrorCounter | undefined,
  ) {
    this.forwarder = new Forwarder(options);
    this.circuits = new UpstreamCircuits(options.circuit, clock, log);
  }

  forward(proxied: ProxiedRequest): Step<Refusal | undefined> {
    // After policy: a caller who may not use the service learns nothing of its health.
    const admission = this.circuits.admit(proxied.upstream!.origin);
    if (!admission.admitted) {
      this.instruments?.upstreamError(proxied.route!.serviceType, 'circuit_open');
      return new Refusal(502, CIRCUIT_OPEN, 'upstream circuit open', [['Retry-After', String(admission.retryAfterSeconds)]]);
    }
    proxied.admission = admission;
    try {
      const sent = then(this.catalogHeaderFor(proxied), proxied, this.send);
      return sent instanceof Promise ? sent.catch((error: unknown) => this.unsent(proxied, error)) : undefined;
    } catch (error) {
      return this.unsent(proxied, error);
    }
  }

  /** Each upstream origin that has had a connection failure, with its circuit's state. */
  circuitStates(): Iterable<[origin: string, state: CircuitState]> {
    return this.circuits.states();
  }

  async close(): Promise<void> {
    await this.forwarder.close();
  }

  private catalogHeaderFor(proxied: ProxiedRequest): Step<string | undefined> {
    if (!this.catalogHeaders) return undefined;
    const { user } = proxied.caller!;
    return this.catalogHeaders.valueFor(user.scope.type === 'project' ? user.scope.project.id : '', user.user.id);
  }

  // (An arrow, made once: then() passes the request as an argument, so no closure per request.)
  private readonly send = (proxied: ProxiedRequest, catalogHeader: string | undefined): undefined => {
    const { request, response } = proxied;
    const target = this.upstreamRequests.build(proxied, catalogHeader);
    // Authenticated, allowed, admitted: now the client may send its body.
    if (proxied.expectsContinue) response.writeContinue();
    this.forwarder.forward(
      request,
      response,
      target,
      (location) => this.rewrite(proxied, location),
      (result) => this.forwarded(proxied, result),
      (error) => {
        this.ended(proxied, undefined);
        this.answers.fail(proxied, error);
      },
    );
    return undefined;
  };

  /** Nothing went to the upstream: the error is answered by the caller. */
  private unsent(proxied: ProxiedRequest, error: unknown): never {
    this.ended(proxied, undefined);
    throw error;
  }

  /** The upstream's answer (or failure) is known: its circuit, and our error response if any. */
  private forwarded(proxied: ProxiedRequest, result: ForwardResult): void {
    const failure = result.failure;
    if (!failure) {
      this.ended(proxied, result);
      return;
    }
    const timedOut = failure.kind === 'timeout' || failure.kind === 'busy';
    const refusal = new Refusal(timedOut ? 504 : 502, timedOut ? TIMED_OUT : UNREACHABLE, `upstream ${failure.kind}: ${failure.detail}`);
    this.ended(proxied, result, refusal.reason);
    if (failure.kind !== 'aborted') this.instruments?.upstreamError(proxied.route!.serviceType, failure.kind);
    this.answers.refuse(proxied, refusal);
  }

  /**
   * The one place an admitted request's end reaches its circuit: the upstream answered (whatever the
   * status), failed to (`why`), or nothing was learned of it (undefined: not sent, a failure of
   * ours, or the client went away) and a half-open trial is released.
   */
  private ended(proxied: ProxiedRequest, result: ForwardResult | undefined, why = ''): void {
    const origin = proxied.upstream!.origin;
    const admission = proxied.admission!;
    // Aborted, or never sent for want of a free connection: nothing the upstream did.
    if (result === undefined || result.failure?.kind === 'aborted' || result.failure?.kind === 'busy') this.circuits.released(origin, admission);
    else if (result.failure === undefined) this.circuits.succeeded(origin, admission);
    else this.circuits.failed(origin, admission, why);
  }

  private rewrite(proxied: ProxiedRequest, location: string): string {
    const { request, route } = proxied;
    return rewriteLocation(location, proxied.upstream!, route!.encodedPath, `${this.publicUrl.base(request)}/${encodeURIComponent(route!.serviceType)}`);
  }
}
