import t from 'tap';
import { gatewayDurationBuckets, inServiceLatency } from '../../bench/load.ts';
import { ServiceMetrics } from '../../src/metrics/service-metrics.ts';

// The ingress bench reads the gateway's request-duration histogram before and after its paced run
// to tell a stall inside the service from one before it; it reads the service's real rendering.

t.test('in-service quantiles come from the gateway face only, between two scrapes', async (t) => {
  const metrics = new ServiceMetrics({ worker: '1', eventLoopDelay: false });
  t.teardown(() => metrics.close());
  metrics.request('ingress', 'GET', 'allowed', 200, 0.002); // before the run: must not count
  const before = gatewayDurationBuckets(metrics.render());

  for (let index = 0; index < 98; index++) metrics.request('ingress', 'GET', 'allowed', 200, 0.0003);
  metrics.request('other', 'POST', 'denied', 403, 0.0003);
  metrics.request('ingress', 'GET', 'allowed', 200, 0.02); // the 1 % tail: in the ≤ 25 ms bucket
  for (let index = 0; index < 50; index++) metrics.identityRequest('/v3/auth/tokens', 'GET', 200, 5); // another face
  const after = gatewayDurationBuckets(metrics.render());

  t.same(inServiceLatency(before, after), { requests: 100, p50AtMost: 0.5, p99AtMost: 0.5 });
  metrics.request('ingress', 'GET', 'allowed', 200, 0.02);
  t.same(inServiceLatency(before, gatewayDurationBuckets(metrics.render())), { requests: 101, p50AtMost: 0.5, p99AtMost: 25 });
});

t.test('nothing recorded between the scrapes is no answer, not a zero', async (t) => {
  const metrics = new ServiceMetrics({ eventLoopDelay: false });
  t.teardown(() => metrics.close());
  const scrape = gatewayDurationBuckets(metrics.render());
  t.equal(inServiceLatency(scrape, scrape), undefined);
  t.equal(inServiceLatency(new Map(), new Map()), undefined);
});
