import { errorEnvelope, statusOf, UnavailableError } from '../support/errors.ts';
import { loggableError } from '../store/loggable-error.ts';
import { serviceErrorOf } from '../store/unavailable.ts';
import type { Refusal } from './outcome.ts';
import type { ProxiedRequest } from './proxied-request.ts';
import type { PublicUrl } from './public-url.ts';

interface ErrorLog {
  error(object: object, message: string): void;
}

/** The answers the gateway gives itself, rather than the upstream: refusals and errors, in Keystone's envelope. */
export class GatewayAnswers {
  constructor(
    private readonly publicUrl: PublicUrl,
    private readonly log: ErrorLog,
  ) {}

  /** A stage's refusal: its headers, then the error response; its reason goes to the audit line. */
  refuse(proxied: ProxiedRequest, refusal: Refusal): void {
    proxied.reason = refusal.reason;
    for (const [name, value] of refusal.headers) proxied.response.setHeader(name, value);
    this.send(proxied, refusal.status, refusal.message);
  }

  /** An error thrown by a stage: domain errors as their status, database failures as 503, anything else as a logged 500. */
  fail(proxied: ProxiedRequest, error: unknown): void {
    const { response } = proxied;
    const known = serviceErrorOf(error);
    if (known) {
      proxied.reason ??= known.message;
      if (known instanceof UnavailableError && known.retryAfterSeconds !== undefined && !response.headersSent) {
        response.setHeader('Retry-After', String(known.retryAfterSeconds));
      }
      this.send(proxied, statusOf(known), known.message);
      return;
    }
    proxied.reason = 'internal error';
    this.log.error({ err: loggableError(error), request_id: proxied.requestId }, 'gateway failure');
    this.send(proxied, 500, 'An unexpected error prevented the server from fulfilling your request.');
  }

  private send({ request, response, requestId }: ProxiedRequest, status: number, message: string): void {
    if (response.headersSent || response.destroyed) {
      // Too late for an error body: the client sees the connection cut; audit and metrics the status.
      if (!response.headersSent) response.statusCode = status;
      response.destroy();
      return;
    }
    const body = errorEnvelope(status, message);
    response.statusCode = status;
    response.setHeader('x-openstack-request-id', requestId);
    if (status === 401) response.setHeader('WWW-Authenticate', `Keystone uri="${this.publicUrl.base(request)}/v3"`);
    response.setHeader('Content-Type', 'application/json');
    response.setHeader('Content-Length', Buffer.byteLength(body));
    // A request body not read: close the connection rather than leave it to be misparsed. (A request
    // without one is answered before Node has marked it complete; its stream started ended.)
    if (!request.complete && !request.readableEnded) response.setHeader('Connection', 'close');
    response.end(request.method === 'HEAD' ? undefined : body);
  }
}

