/**
 * The benchmark scenarios: one fixed HTTP request each, replayed by autocannon over keep-alive
 * connections. Each names the processes whose CPU time it is charged with.
 */
import type { Fixtures } from './fixtures.ts';

export const SCENARIO_NAMES = [
  'token-issue-password',
  'token-issue-app-credential',
  'token-validate',
  'catalog-read',
  'list-users',
  'upstream-direct',
  'bare-proxy',
  'gateway',
] as const;

export type ScenarioName = (typeof SCENARIO_NAMES)[number];

/** Which role a measured process plays; the report has one CPU column per role. */
export type ProcessRole = 'service' | 'proxy' | 'upstream';

export interface Scenario {
  name: ScenarioName;
  /** What the number means, for the README and the results file. */
  measures: string;
  method: 'GET' | 'POST';
  url: string;
  headers: Record<string, string>;
  body?: string;
  /** Processes whose CPU time is read before and after the run (empty lists are left out). */
  processes: Partial<Record<ProcessRole, number[]>>;
}

/** Which helper processes a selection needs (the upstream only serves the last three). */
export function needs(selected: readonly ScenarioName[]): { service: boolean; upstream: boolean; bareProxy: boolean } {
  return {
    service: selected.some((name) => name !== 'upstream-direct' && name !== 'bare-proxy'),
    upstream: selected.some((name) => name === 'upstream-direct' || name === 'bare-proxy' || name === 'gateway'),
    bareProxy: selected.includes('bare-proxy'),
  };
}

export interface ScenarioContext {
  serviceUrl?: string;
  /** The service's processes (empty: CPU not measured, e.g. BENCH_URL without BENCH_PIDS). */
  servicePids: number[];
  upstream?: { url: string; pid: number };
  bareProxy?: { url: string; pid: number };
  fixtures?: Fixtures;
}

export function buildScenario(name: ScenarioName, context: ScenarioContext): Scenario {
  const { serviceUrl, servicePids, upstream, bareProxy, fixtures } = context;
  const service = () => {
    if (!serviceUrl || !fixtures) throw new Error(`${name} needs the service`);
    return { base: serviceUrl, fixtures };
  };
  const json = { 'content-type': 'application/json' };
  // The same path (and token header, so requests are the same size) on all three upstream routes.
  const thingsPath = (projectId: string) => `/v1/${projectId}/things`;
  switch (name) {
    case 'token-issue-password': {
      const { base, fixtures: f } = service();
      return {
        name,
        measures: 'POST /v3/auth/tokens, password method, project scope: one bcrypt verification per request at the service default cost (12)',
        method: 'POST',
        url: `${base}/v3/auth/tokens`,
        headers: json,
        body: f.passwordAuth,
        processes: { service: servicePids },
      };
    }
    case 'token-issue-app-credential': {
      const { base, fixtures: f } = service();
      return {
        name,
        measures: 'POST /v3/auth/tokens, application_credential method (HMAC-peppered secret, no bcrypt)',
        method: 'POST',
        url: `${base}/v3/auth/tokens`,
        headers: json,
        body: f.applicationCredentialAuth,
        processes: { service: servicePids },
      };
    }
    case 'token-validate': {
      const { base, fixtures: f } = service();
      return {
        name,
        measures: 'GET /v3/auth/tokens: admin X-Auth-Token validates the user X-Subject-Token (what keystonemiddleware does per API call)',
        method: 'GET',
        url: `${base}/v3/auth/tokens`,
        headers: { 'x-auth-token': f.adminToken, 'x-subject-token': f.userToken },
        processes: { service: servicePids },
      };
    }
    case 'catalog-read': {
      const { base, fixtures: f } = service();
      return {
        name,
        measures: "GET /v3/auth/catalog with the user's project token",
        method: 'GET',
        url: `${base}/v3/auth/catalog`,
        headers: { 'x-auth-token': f.userToken },
        processes: { service: servicePids },
      };
    }
    case 'list-users': {
      const { base, fixtures: f } = service();
      return {
        name,
        measures: 'GET /v3/users?domain_id=<bench domain> (20 users) with the admin token, as bench.sh lists',
        method: 'GET',
        url: `${base}/v3/users?domain_id=${f.domainId}`,
        headers: { 'x-auth-token': f.adminToken },
        processes: { service: servicePids },
      };
    }
    case 'upstream-direct': {
      if (!upstream) throw new Error('upstream-direct needs the upstream');
      return {
        name,
        measures: 'GET on the trivial JSON upstream itself: the ceiling for anything in front of it',
        method: 'GET',
        url: `${upstream.url}${thingsPath(fixtures?.projectId ?? 'p')}`,
        headers: { 'x-auth-token': fixtures?.userToken ?? 'none' },
        processes: { upstream: [upstream.pid] },
      };
    }
    case 'bare-proxy': {
      if (!upstream || !bareProxy) throw new Error('bare-proxy needs the upstream and the bare proxy');
      return {
        name,
        measures: 'GET through node:http + undici Pool (no auth, no policy) to the upstream: what a lean proxy costs',
        method: 'GET',
        url: `${bareProxy.url}${thingsPath(fixtures?.projectId ?? 'p')}`,
        headers: { 'x-auth-token': fixtures?.userToken ?? 'none' },
        processes: { proxy: [bareProxy.pid], upstream: [upstream.pid] },
      };
    }
    case 'gateway': {
      const { base, fixtures: f } = service();
      if (!upstream) throw new Error('gateway needs the upstream');
      return {
        name,
        measures: 'GET /bench/v1/<project>/things through the gateway: token validation, policy, identity headers, proxying',
        method: 'GET',
        url: `${base}/bench${thingsPath(f.projectId)}`,
        headers: { 'x-auth-token': f.userToken },
        processes: { service: servicePids, upstream: [upstream.pid] },
      };
    }
  }
}
