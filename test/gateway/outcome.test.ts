import type { IncomingMessage, ServerResponse } from 'node:http';
import t from 'tap';
import { decisionOf, outcomeOf, refusedByGateway } from '../../src/gateway/outcome.ts';
import { ProxiedRequest } from '../../src/gateway/proxied-request.ts';
import type { TokenContext } from '../../src/token/token-service.ts';

// The outcome is read from what the stages found, so far as the request got: a request cut short
// (client gone mid-validation, a refusal) has only the fields of the stages it passed.

function proxied(method = 'GET'): ProxiedRequest {
  return new ProxiedRequest({ method } as IncomingMessage, {} as ServerResponse, false);
}

const user = { auditIds: ['audit-1'], user: { id: 'user-1' }, scope: { type: 'project', project: { id: 'project-1' } } } as unknown as TokenContext;
const route = { target: { segments: ['echo', 'v1'], path: '/echo/v1', encodedPath: '/echo/v1', query: '' }, serviceType: 'echo', path: '/v1', encodedPath: '/v1' };

t.test('a request refused before any stage found anything: request id, method, status, reason', (t) => {
  const request = proxied('TRACE');
  request.reason = 'method not allowed';
  const outcome = outcomeOf(request, 405, 1.23456);
  t.match(outcome, { request_id: /^req-/, method: 'TRACE', path: '', status: 405, reason: 'method not allowed', latency_ms: 1.235 });
  t.same(JSON.parse(JSON.stringify(outcome)), { request_id: outcome.request_id, method: 'TRACE', path: '', reason: 'method not allowed', status: 405, latency_ms: 1.235 }, 'no field of a stage not reached');
  t.equal(decisionOf(outcome), 'error');
  t.notOk(refusedByGateway(outcome));
  t.end();
});

t.test('every stage passed: who, where, which rule', (t) => {
  const request = proxied();
  request.route = route;
  request.caller = { user, service: undefined, privilegedService: false };
  request.upstream = { serviceType: 'echo', endpointId: 'e', origin: 'http://echo:1', host: 'echo:1', basePath: '/v1' };
  request.authorization = { allowed: true, reason: 'allowed', rule: 'p, reader, project, /v1, GET, allow' };
  const outcome = outcomeOf(request, 200, 2);
  t.match(outcome, {
    path: '/echo/v1',
    service: 'echo',
    audit_id: 'audit-1',
    user_id: 'user-1',
    project_id: 'project-1',
    upstream: 'http://echo:1',
    effect: 'allow',
    rule: 'p, reader, project, /v1, GET, allow',
    status: 200,
  });
  t.equal(outcome.reason, undefined);
  t.equal(decisionOf(outcome), 'allowed');
  t.notOk(refusedByGateway(outcome), 'a 401 or 403 of the service is not ours');
  t.notOk(refusedByGateway(outcomeOf(request, 401, 1)));
  t.end();
});

t.test('decisions and denials', (t) => {
  const unauthenticated = proxied();
  unauthenticated.route = route;
  unauthenticated.reason = 'no token';
  t.equal(decisionOf(outcomeOf(unauthenticated, 401, 1)), 'unauthenticated');
  t.ok(refusedByGateway(outcomeOf(unauthenticated, 401, 1)), 'a 401 before policy is ours');

  const denied = proxied();
  denied.route = route;
  denied.caller = { user, service: undefined, privilegedService: false };
  denied.authorization = { allowed: false, reason: 'no rule allows' };
  const outcome = outcomeOf(denied, 403, 1);
  t.equal(decisionOf(outcome), 'denied');
  t.ok(refusedByGateway(outcome));
  t.equal(outcome.rule, undefined, 'no rule matched');
  t.end();
});
