import t from 'tap';
import { gatewayDurations, inServiceLatency } from '../../bench/load.ts';
import { ServiceMetrics } from '../../src/metrics/service-metrics.ts';

// The ingress bench reads the gateway's request-duration histogram before and after its paced run
// to tell a stall inside the service from one before it; it reads the service's real rendering.

t.test('in-service quantiles come from the service type on the gateway face only, between two scrapes', async (t) => {
  const metrics = new ServiceMetrics({ eventLoopDelay: false });
  t.teardown(() => metrics.close());
  metrics.request('ingress', 'GET', 'allowed', 200, 0.002); // before the run: must not count
  const before = gatewayDurations(metrics.render(), 'ingress');

  for (let index = 0; index < 98; index++) metrics.request('ingress', 'GET', 'allowed', 200, 0.0003);
  metrics.request('ingress', 'POST', 'denied', 403, 0.0003); // a series that began after the first scrape
  metrics.request('ingress', 'GET', 'allowed', 200, 0.02); // the 1 % tail: in the ≤ 25 ms bucket
  for (let index = 0; index < 50; index++) metrics.request('ingress-other', 'GET', 'allowed', 200, 5); // another service type
  for (let index = 0; index < 50; index++) metrics.identityRequest('/v3/auth/tokens', 'GET', 200, 5); // another face
  t.same(inServiceLatency(before, gatewayDurations(metrics.render(), 'ingress')), { requests: 100, p50AtMost: 0.5, p99AtMost: 0.5, overTenMs: 1 });

  metrics.request('ingress', 'GET', 'allowed', 200, 0.02);
  t.same(inServiceLatency(before, gatewayDurations(metrics.render(), 'ingress')), { requests: 101, p50AtMost: 0.5, p99AtMost: 25, overTenMs: 2 });
});

t.test('under WORKERS only the workers heard in both scrapes count', async (t) => {
  const one = new ServiceMetrics({ worker: '1', eventLoopDelay: false });
  const two = new ServiceMetrics({ worker: '2', eventLoopDelay: false });
  t.teardown(() => (one.close(), two.close()));
  for (let index = 0; index < 1000; index++) two.request('ingress', 'GET', 'allowed', 200, 0.2); // served before the run
  one.request('ingress', 'GET', 'allowed', 200, 0.0003);
  // The first scrape missed worker 2 (it did not answer the primary in time).
  const before = gatewayDurations(one.render(), 'ingress');
  t.same([...before.workers], ['1']);
  for (let index = 0; index < 10; index++) one.request('ingress', 'GET', 'allowed', 200, 0.0003);
  for (let index = 0; index < 10; index++) two.request('ingress', 'GET', 'allowed', 200, 0.0003);
  const after = gatewayDurations(one.render() + two.render(), 'ingress');
  t.same([...after.workers].sort(), ['1', '2']);
  t.same(inServiceLatency(before, after), { requests: 10, p50AtMost: 0.5, p99AtMost: 0.5, overTenMs: 0 }, "worker 2's earlier 1,000 slow requests are not read as this run's");

  const bothBefore = gatewayDurations(one.render() + two.render(), 'ingress');
  two.request('ingress', 'GET', 'allowed', 200, 0.2);
  t.same(inServiceLatency(bothBefore, gatewayDurations(one.render() + two.render(), 'ingress')), { requests: 1, p50AtMost: 250, p99AtMost: 250, overTenMs: 1 });
});

t.test('nothing recorded between the scrapes is no answer, not a zero', async (t) => {
  const metrics = new ServiceMetrics({ eventLoopDelay: false });
  t.teardown(() => metrics.close());
  const scrape = gatewayDurations(metrics.render(), 'ingress');
  t.equal(inServiceLatency(scrape, scrape), undefined);
});
