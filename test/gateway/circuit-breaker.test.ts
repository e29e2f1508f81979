import http from 'node:http';
import t from 'tap';
import { pino } from 'pino';
import { UpstreamCircuits, type Admission } from '../../src/gateway/circuit-breaker.ts';
import { ManualClock } from '../helpers/clock.ts';
import { gatewayWorld, type World } from '../helpers/gateway.ts';
import { reservePort } from '../helpers/processes.ts';
import { rawRequest, startEchoUpstream } from '../helpers/upstream.ts';

// A service that stops answering is refused at once (502, Retry-After) instead of costing every
// request a connection attempt or a timeout; one trial request after the cool-down tells whether it is back.

const CIRCUIT_MESSAGE = 'The service behind the gateway is unavailable after repeated connection failures; retry later.';

function silentLog() {
  const lines: { level: string; message: string; fields: object }[] = [];
  return {
    lines,
    info: (fields: object, message: string) => lines.push({ level: 'info', message, fields }),
    warn: (fields: object, message: string) => lines.push({ level: 'warn', message, fields }),
  };
}

t.test('UpstreamCircuits: closed → open → half-open → closed, per origin', async (t) => {
  const clock = new ManualClock();
  const log = silentLog();
  const circuits = new UpstreamCircuits({ failureThreshold: 3, openMs: 10_000 }, clock, log);
  const a = 'http://a:1';
  const b = 'http://b:1';
  const go = (origin: string): Admission => {
    const admission = circuits.admit(origin);
    t.ok(admission.admitted, `${origin} admitted`);
    return admission;
  };
  circuits.failed(a, go(a), 'refused');
  circuits.failed(a, go(a), 'refused');
  circuits.succeeded(a, go(a));
  circuits.failed(a, go(a), 'refused');
  circuits.failed(a, go(a), 'refused');
  t.equal(circuits.state(a), 'closed', 'an answer in between resets the count');
  circuits.failed(a, go(a), 'timeout');
  t.equal(circuits.state(a), 'open', 'the third consecutive failure opens it');
  t.same(circuits.admit(a), { admitted: false, retryAfterSeconds: 10 });
  t.equal(circuits.state(b), 'closed', 'another origin is unaffected');
  go(b);
  t.match(log.lines, [{ level: 'warn', message: /^upstream circuit opened/, fields: { upstream: a, open_ms: 10_000 } }]);

  clock.advance(7_500);
  t.same(circuits.admit(a), { admitted: false, retryAfterSeconds: 3 }, 'Retry-After counts down (rounded up)');
  clock.advance(2_500);
  const trial = circuits.admit(a);
  t.same(trial, { admitted: true, trial: true }, 'after the cool-down one trial goes through');
  t.equal(circuits.state(a), 'half_open');
  t.same(circuits.admit(a), { admitted: false, retryAfterSeconds: 1 }, 'only one trial at a time');
  circuits.failed(a, trial, 'refused');
  t.equal(circuits.state(a), 'open', 'a failed trial opens it again');
  t.same(circuits.admit(a), { admitted: false, retryAfterSeconds: 10 }, 'for a whole new cool-down');

  clock.advance(10_000);
  const aborted = circuits.admit(a);
  circuits.released(a, aborted);
  t.equal(circuits.state(a), 'half_open', 'a trial that told nothing (client gone) leaves it half-open');
  const second = circuits.admit(a);
  t.same(second, { admitted: true, trial: true }, 'and the next request becomes the trial');
  circuits.succeeded(a, second);
  t.equal(circuits.state(a), 'closed', 'a successful trial closes it');
  t.match(log.lines.at(-1), { level: 'info', message: /^upstream circuit closed/ });
  t.same([...circuits.states()], [[a, 'closed']]);

  const off = new UpstreamCircuits({ failureThreshold: 0, openMs: 10_000 }, clock, log);
  for (let i = 0; i < 20; i++) off.failed(a, off.admit(a), 'refused');
  t.equal(off.state(a), 'closed', 'threshold 0 turns circuits off');
});

t.test('UpstreamCircuits: a request let through before the circuit opened does not decide the trial', async (t) => {
  const clock = new ManualClock();
  const circuits = new UpstreamCircuits({ failureThreshold: 1, openMs: 1000 }, clock, silentLog());
  const origin = 'http://a:1';
  const early = circuits.admit(origin);
  circuits.failed(origin, circuits.admit(origin), 'refused');
  clock.advance(1000);
  const trial = circuits.admit(origin);
  circuits.succeeded(origin, early);
  t.equal(circuits.state(origin), 'half_open', 'a late answer of an older request is not the trial');
  circuits.failed(origin, early, 'refused');
  t.equal(circuits.state(origin), 'half_open');
  circuits.succeeded(origin, trial);
  t.equal(circuits.state(origin), 'closed');
});

interface Answer {
  status: number;
  message: string;
  retryAfter: string | undefined;
}

async function get(w: World, path = '/echo/v1/public/x'): Promise<Answer> {
  const response = await rawRequest(w.port, { path, headers: { 'x-auth-token': w.member } });
  const retryAfter = response.headers['retry-after'];
  return { status: response.status, message: JSON.parse(response.body).error?.message ?? '', retryAfter: typeof retryAfter === 'string' ? retryAfter : undefined };
}

async function metricValue(w: World, series: string): Promise<number | undefined> {
  const text = (await w.testApp.request({ method: 'GET', url: '/metrics' })).body;
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

t.test('gateway: an unreachable upstream opens its circuit; requests are then refused without connecting', async (t) => {
  const lines: string[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
  // The service stops and comes back on the same port, which stays reserved meanwhile: a stopped
  // service's port refuses connections, and no other process can take it.
  const port = await reservePort(t);
  const first = await startEchoUpstream(port.port, { reusePort: true });
  t.teardown(() => first.close());
  // (A response timeout far above the trial's hold, however slow the machine.)
  const w = await gatewayWorld(t, { UPSTREAM_CIRCUIT_FAILURES: '3', UPSTREAM_CIRCUIT_OPEN_MS: '10000', UPSTREAM_RESPONSE_TIMEOUT_MS: '60000' }, { logger, upstream: first });
  t.equal((await get(w)).status, 200, 'closed: requests go through');
  await first.close();

  for (let i = 1; i <= 3; i++) {
    const down = await get(w);
    t.equal(down.status, 502, `failure ${i}`);
    t.equal(down.message, 'The service behind the gateway could not be reached.', `failure ${i} tried to connect`);
    t.equal(down.retryAfter, undefined);
  }
  t.ok(
    lines.some((line) => JSON.parse(line).msg === 'upstream circuit opened: requests are refused without connecting'),
    'a log line says the circuit opened',
  );

  // The service comes back on the same port: while the circuit is open, nothing connects to it.
  const upstream = await startEchoUpstream(port.port, { reusePort: true });
  t.teardown(() => upstream.close());
  for (let i = 0; i < 3; i++) {
    const refused = await get(w);
    t.equal(refused.status, 502);
    t.equal(refused.message, CIRCUIT_MESSAGE, 'Keystone-shaped, says the service is unavailable');
    t.equal(refused.retryAfter, '10');
  }
  const withBody = await rawRequest(w.port, { method: 'POST', path: '/echo/v1/public/x', headers: { 'x-auth-token': w.member, 'content-length': '2' }, body: '{}' });
  t.equal(withBody.status, 502, 'a request with a body is refused the same way');
  t.equal(upstream.connections, 0, 'no connection was attempted while the circuit was open');
  t.same(upstream.received, []);
  t.equal(await metricValue(w, 'keystone_gateway_upstream_circuit_state{upstream="' + w.upstream.url + '"}'), 1, 'circuit state gauge: open');
  t.equal(await metricValue(w, 'keystone_gateway_upstream_errors_total{service="echo",kind="connect"}'), 3);
  t.equal(await metricValue(w, 'keystone_gateway_upstream_errors_total{service="echo",kind="circuit_open"}'), 4);

  // A caller the policy refuses learns nothing of the upstream's health.
  const denied = await rawRequest(w.port, { method: 'POST', path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': w.reader } });
  t.equal(denied.status, 403);

  w.testApp.clock.advance(7_001);
  t.equal((await get(w)).retryAfter, '3', 'Retry-After counts down with the clock');

  // Half-open: one trial goes through (its answer held until the test has asked again); a request
  // meanwhile is refused.
  w.testApp.clock.advance(3_000);
  const release = upstream.holdAnswers();
  const trial = get(w);
  while (upstream.received.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
  const during = await get(w);
  release();
  t.equal(during.status, 502, 'refused while the trial is under way');
  t.equal(during.retryAfter, '1');
  t.equal((await trial).status, 200, 'the trial reached the service');
  t.equal(upstream.received.length, 1, 'exactly one request went through as the trial');

  t.equal((await get(w)).status, 200, 'the successful trial closed the circuit');
  t.equal((await get(w)).status, 200);
  t.equal(upstream.received.length, 3);
  t.ok(
    lines.some((line) => JSON.parse(line).msg === 'upstream circuit closed: the trial request succeeded'),
    'a log line says the circuit closed',
  );
  t.equal(await metricValue(w, 'keystone_gateway_upstream_circuit_state{upstream="' + w.upstream.url + '"}'), 0, 'circuit state gauge: closed');
  const audits = lines.map((line) => JSON.parse(line)).filter((entry) => entry.msg === 'gateway' && entry.audit.reason === 'upstream circuit open');
  t.ok(audits.length >= 5, 'refused requests are audited with their reason');
});

t.test('gateway: a failed trial opens the circuit again; timeouts count as failures', async (t) => {
  const w = await gatewayWorld(t, { UPSTREAM_CIRCUIT_FAILURES: '2', UPSTREAM_CIRCUIT_OPEN_MS: '5000' });
  w.upstream.delayMs = 2000; // UPSTREAM_RESPONSE_TIMEOUT_MS is 1000 in gatewayWorld
  t.equal((await get(w)).status, 504);
  t.equal((await get(w)).status, 504);
  const refused = await get(w);
  t.same(refused, { status: 502, message: CIRCUIT_MESSAGE, retryAfter: '5' }, 'two timeouts opened it');
  const received = w.upstream.received.length;

  await w.upstream.close();
  w.testApp.clock.advance(5_000);
  const trial = await get(w);
  t.equal(trial.status, 502);
  t.equal(trial.message, 'The service behind the gateway could not be reached.', 'the trial tried to connect and failed');
  const again = await get(w);
  t.same(again, { status: 502, message: CIRCUIT_MESSAGE, retryAfter: '5' }, 'open again for a whole cool-down');
  t.equal(w.upstream.received.length, received);
  t.equal(await metricValue(w, 'keystone_gateway_upstream_errors_total{service="echo",kind="timeout"}'), 2);
});

t.test('gateway: a service answering 5xx is reachable: its circuit stays closed', async (t) => {
  const w = await gatewayWorld(t, { UPSTREAM_CIRCUIT_FAILURES: '2' });
  let answered = 0;
  const failing = http.createServer((_request, response) => {
    answered++;
    response.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"down for maintenance"}');
  });
  await new Promise<void>((resolve) => failing.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise((resolve) => failing.close(resolve)));
  const address = failing.address() as { port: number };
  const endpoint = (await w.testApp.call('GET', '/v3/endpoints?interface=internal')).json().endpoints.find((e: { url: string }) => e.url.startsWith(w.upstream.url));
  t.equal((await w.testApp.call('PATCH', `/v3/endpoints/${endpoint.id}`, { endpoint: { url: `http://127.0.0.1:${address.port}/v1` } })).statusCode, 200);
  for (let i = 0; i < 5; i++) t.equal((await get(w)).status, 503, "the service's own 503 is passed through");
  t.equal(answered, 5, 'every request reached the service');
  // Gateway refusals (404 no endpoint, 403 policy) never touch a circuit either.
  for (let i = 0; i < 3; i++) {
    t.equal((await rawRequest(w.port, { path: '/nosuch/x', headers: { 'x-auth-token': w.member } })).status, 404);
    t.equal((await rawRequest(w.port, { method: 'POST', path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': w.reader } })).status, 403);
  }
  t.equal(answered, 5);
});
