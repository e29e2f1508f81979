import { networkMatcher } from '../../support/network-matcher.ts';
import { CONTENT_TYPE } from '../../metrics/registry.ts';
import type { ServiceMetrics } from '../../metrics/service-metrics.ts';
import type { App } from '../context.ts';
import { sendError } from '../errors.ts';

/** Counts every identity API request by route template, method, decision and status class. */
export function registerRequestMetrics(app: App, metrics: ServiceMetrics): void {
  app.addHook('onResponse', (request, reply, done) => {
    metrics.identityRequest(request.routeOptions.url ?? 'unmatched', request.method, reply.statusCode, reply.elapsedTime / 1000);
    done();
  });
}

/**
 * GET /metrics (Prometheus text format): no token, but only for socket peers in
 * METRICS_ALLOWED_NETWORKS — never X-Forwarded-For, which any client writes. An empty list leaves
 * the route out (404).
 */
export function registerMetricsRoutes(app: App, metrics: ServiceMetrics, allowedNetworks: readonly string[]): void {
  if (allowedNetworks.length === 0) return;
  const allowed = networkMatcher(allowedNetworks);
  app.get('/metrics', { config: { public: true }, logLevel: 'warn' }, async (request, reply) => {
    if (!allowed(request.socket.remoteAddress)) return sendError(request, reply, 403, 'Metrics are not available from this address.');
    reply.header('Content-Type', CONTENT_TYPE).header('Cache-Control', 'no-store');
    return metrics.renderAll();
  });
}
