import http from 'node:http';
import { errorEnvelope } from '../support/errors.ts';
import type { FastifyBaseLogger } from 'fastify';
import { newRequestId } from '../support/request-id.ts';

/**
 * Expect: 100-continue. Node answers 100 at once unless the server has a 'checkContinue' listener;
 * then the request is ours, and 100 is sent only when we decide to read the body: on the gateway
 * once the request is authenticated and allowed, on the identity API once its token is validated
 * (at once on public routes). A refused client never uploads its body first; a final answer without
 * 100 closes the connection (Node), so a body sent early anyway is never read as a request.
 */

/** Marks an identity API request whose client waits for 100 Continue. */
const EXPECTS_CONTINUE = Symbol('expectsContinue');

type Marked = http.IncomingMessage & { [EXPECTS_CONTINUE]?: true };

export function markExpectsContinue(request: http.IncomingMessage): void {
  (request as Marked)[EXPECTS_CONTINUE] = true;
}

/** The identity API request's client waits for 100 Continue (and has not had it). */
export function awaitsContinue(request: http.IncomingMessage, response: http.ServerResponse): boolean {
  return (request as Marked)[EXPECTS_CONTINUE] === true && !response.headersSent;
}

/**
 * Sends 100 Continue if the client waits for it: called by the identity API's token check once the
 * token is validated, or at once for a public route (no hook of its own, which would cost every
 * identity request fastify's hook runner).
 */
export function continueIfExpected(request: http.IncomingMessage, response: http.ServerResponse): void {
  if (awaitsContinue(request, response)) response.writeContinue();
}

/**
 * Node's 'checkContinue' takes any Expect containing the word 100-continue ("100-continue, foo"):
 * only an expectation of exactly 100-continue (any case) can be met.
 */
export function onlyContinueExpected(request: http.IncomingMessage): boolean {
  return (request.headers.expect ?? '').trim().toLowerCase() === '100-continue';
}

const EXPECTATION_FAILED = errorEnvelope(417, 'The expectation in the Expect header cannot be met: only 100-continue is supported.');

/** Any Expect other than exactly 100-continue: 417 in Keystone's shape, with a request id, logged. */
export function answerExpectationFailed(request: http.IncomingMessage, response: http.ServerResponse, log: FastifyBaseLogger): void {
  const id = newRequestId();
  response.writeHead(417, {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(EXPECTATION_FAILED),
    'x-openstack-request-id': id,
    // What the client meant to do with its body is unknown: the connection is not reused.
    Connection: 'close',
  });
  response.end(request.method === 'HEAD' ? undefined : EXPECTATION_FAILED);
  const path = (request.url ?? '').split('?', 1)[0];
  log.info({ request_id: id, method: request.method, path, status: 417, expect: request.headers.expect?.slice(0, 200) }, 'expectation failed');
}
