import http from 'node:http';
import type { App } from './context.ts';

/**
 * Expect: 100-continue. Node answers 100 at once unless the server has a 'checkContinue' listener;
 * then the request is ours, and 100 is sent only when we decide to read the body: on the gateway
 * once the request is authenticated and allowed, on the identity API once its token is validated
 * (at once on public routes). A refused client never uploads its body first.
 */

/** Marks an identity API request whose client waits for 100 Continue. */
const EXPECTS_CONTINUE = Symbol('expectsContinue');

export function markExpectsContinue(request: http.IncomingMessage): void {
  (request as { [EXPECTS_CONTINUE]?: true })[EXPECTS_CONTINUE] = true;
}

/**
 * Sends 100 Continue just before the body is read: preParsing runs after the onRequest hook that
 * validates X-Auth-Token (a 401 there ends the request before this hook).
 */
export function registerExpectContinue(app: App): void {
  // (A callback hook: an async one would cost every identity request a promise.)
  app.addHook('preParsing', (request, reply, payload, done) => {
    if ((request.raw as { [EXPECTS_CONTINUE]?: true })[EXPECTS_CONTINUE] && !reply.raw.headersSent) reply.raw.writeContinue();
    done(null, payload);
  });
}

const EXPECTATION_FAILED = JSON.stringify({
  error: { code: 417, title: http.STATUS_CODES[417], message: 'The expectation in the Expect header cannot be met: only 100-continue is supported.' },
});

/** Any Expect other than 100-continue (Node's 'checkExpectation'): 417 in Keystone's shape. */
export function answerExpectationFailed(response: http.ServerResponse): void {
  response.writeHead(417, {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(EXPECTATION_FAILED),
    // What the client meant to do with its body is unknown: the connection is not reused.
    Connection: 'close',
  });
  response.end(EXPECTATION_FAILED);
}
