import type { App } from '../context.ts';
import { sendError } from '../errors.ts';

/** What GET /readyz asks of the process (built in app.ts, which knows the parts). */
export interface ReadinessProbe {
  /** True once shutdown has begun: not ready, whatever the checks say. */
  draining(): boolean;
  /** Each condition by name ('database', 'token_keys', …): true when met; a throw means not met. */
  checks: Record<string, () => boolean | Promise<boolean>>;
}

/** A probe that hangs (a saturated pool, an unanswering database) counts as a failure, not a hang. */
const CHECK_TIMEOUT_MS = 2000;

interface CheckResult {
  ok: boolean;
  error?: unknown;
}

async function passes(check: () => boolean | Promise<boolean>): Promise<CheckResult> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${CHECK_TIMEOUT_MS} ms`)), CHECK_TIMEOUT_MS);
  });
  try {
    return { ok: (await Promise.race([Promise.resolve().then(check), timeout])) === true };
  } catch (error) {
    return { ok: false, error };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * GET /healthz: the process answers (no dependency is touched). GET /readyz: it can serve requests
 * now. Both public, for load balancers and orchestrators; probe requests log only warnings.
 */
export function registerHealthRoutes(app: App, probe: ReadinessProbe): void {
  app.get('/healthz', { config: { public: true }, logLevel: 'warn' }, async () => ({ status: 'ok' }));

  // Concurrent probes share one run of each check: a flood of /readyz (a public route) costs one
  // database query at a time, not a pool's worth.
  const running = new Map<string, Promise<CheckResult>>();
  const run = (name: string): Promise<CheckResult> => {
    let result = running.get(name);
    if (!result) {
      result = passes(probe.checks[name]!).finally(() => running.delete(name));
      running.set(name, result);
    }
    return result;
  };

  app.get('/readyz', { config: { public: true }, logLevel: 'warn' }, async (request, reply) => {
    if (probe.draining()) return sendError(request, reply, 503, 'The service is not ready: shutting down.');
    const names = Object.keys(probe.checks);
    const results = await Promise.all(names.map(run));
    const failing = names.flatMap((name, index) => (results[index]!.ok ? [] : [{ name, error: results[index]!.error }]));
    if (failing.length > 0) {
      // Causes go to the log only: this route is public, and they can name hosts and databases.
      for (const { name, error } of failing) request.log.warn({ check: name, err: error }, 'readiness check failed');
      return sendError(request, reply, 503, `The service is not ready: ${failing.map(({ name }) => name).join(', ')}.`);
    }
    return { status: 'ok', checks: Object.fromEntries(names.map((name) => [name, 'ok'])) };
  });
}
