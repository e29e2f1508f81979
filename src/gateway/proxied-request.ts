import type { ClientRequest, ClientResponse } from './client-exchange.ts';
import type { InternalEndpoint } from '../catalog/internal-endpoints.ts';
import type { GatewayExplanation, PolicySubject } from '../policy/gateway-explain.ts';
import { drawRequestId, type DrawnRequestId } from '../support/request-id.ts';
import type { TokenContext } from '../token/token-service.ts';
import type { Admission } from './circuit-breaker.ts';
import type { CanonicalTarget } from './path.ts';

/** What canonicalise found: where the request goes, in the form policy decides on and the form forwarded. */
export interface Route {
  target: CanonicalTarget;
  /** The first canonical segment, /{service_type}. */
  serviceType: string;
  /** The canonical path after /{service_type}, decoded (what policy sees). */
  path: string;
  /** The same, encoded (what is forwarded). */
  encodedPath: string;
}

/** What authenticate found: whose request it is. */
export interface Caller {
  user: TokenContext;
  service: TokenContext | undefined;
  /** The service token carries a SERVICE_TOKEN_ROLES role: only then are access rules waived. */
  privilegedService: boolean;
}

/** What authorise decided; the access-rule check comes first. */
export interface Authorization {
  allowed: boolean;
  reason: GatewayExplanation['reason'];
  rule?: string;
  source?: string;
  line?: number;
}

/**
 * One proxied request on its way through the stages (canonicalise → authenticate → resolve →
 * authorise → forward). Each stage records what it found in its own field, once; `reason` is
 * recorded where the gateway answers for itself. When the response closes, the outcome is read
 * from here (outcome.ts): a request cut short has the fields of the stages it got through.
 */
export class ProxiedRequest {
  readonly started = performance.now();
  /** The request id with the bytes it was drawn from (the decision store keeps the bytes). */
  readonly drawnRequestId: DrawnRequestId = drawRequestId();
  readonly requestId = this.drawnRequestId.text;
  /** canonicalise */
  route: Route | undefined = undefined;
  /** authenticate */
  caller: Caller | undefined = undefined;
  /** resolve */
  upstream: InternalEndpoint | undefined = undefined;
  /** authorise: who policy saw (kept with the decision, for replay), and what it decided */
  subject: PolicySubject | undefined = undefined;
  authorization: Authorization | undefined = undefined;
  /** authorise, with POLICY_SHADOW_DIR: what the shadow policy would have decided (never enforced). */
  shadow: Authorization | undefined = undefined;
  /** forward: the circuit's admission, settled once when the exchange ends. */
  admission: Admission | undefined = undefined;
  /** Why the gateway answered itself (a refusal, an error, the upstream's failure). */
  reason: string | undefined = undefined;

  constructor(
    readonly request: ClientRequest,
    readonly response: ClientResponse,
    /** The client sent Expect: 100-continue and waits for 100 before its body. */
    readonly expectsContinue: boolean,
  ) {}
}

/** A request header sent once and not empty, else undefined. */
export function header(request: ClientRequest, name: string): string | undefined {
  const value = request.headers[name];
  return typeof value === 'string' && value.length > 0 ? value : undefined;
}
