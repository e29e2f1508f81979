// Cache hit rates under a steady write load: `npx tsx bench/cache-hit-rates.ts`
// (BENCH_SECONDS per write mix, default 6; BENCH_WRITES_PER_SECOND, default 20).
//
// One in-process service (embedded database, the test helpers' gateway world: an echo upstream
// registered as `echo`, X-Service-Catalog on), a few project-scoped tokens, and for each write mix:
// ordinary admin writes at a steady rate that touch none of the validated tokens' data, while
// tokens are validated (GET /v3/auth/tokens) and gateway requests sent (GET /echo/v1/{project}/things)
// at 100/s each (reads alone for 2 s first, not counted). Printed per mix: the hit rates of the
// token validation cache (identity API and gateway validations), the gateway's upstream table
// (1 - reloads / requests), its X-Service-Catalog cache and the catalog service's built catalogs.
//
// Measured on 2 cores shared with other busy processes (the absolute rates are noisy; the
// differences are not), 6 s per mix, 20 writes/s, 100 identity-API validations/s (each validates
// the caller's and the subject token) + 100 gateway requests/s:
//
// before (one generation for every cache, bumped by every committed write):
//   write mix                writes  token validation  upstream table  X-Service-Catalog  built catalogs  failed reads
//   catalog update           105     14.8% of 1266     98.7% of 387    31.8% of 387       30.6% of 651    0
//   project create           102     6.5% of 1119      98.5% of 339    26.3% of 339       42.6% of 589    0
//   project update           80      9.6% of 654       99.0% of 191    6.8% of 192        3.2% of 370     0
//   user create              83      7.7% of 637       98.9% of 184    3.8% of 186        1.4% of 363     0
//   user update              83      17.6% of 682      99.0% of 199    12.4% of 201       99.5% of 375    0
//   mixed (1 in 10 catalog)  83      7.1% of 714       99.0% of 210    4.3% of 211        1.9% of 412     0
// after (typed change events, each cache on the topics it holds):
//   write mix                writes  token validation  upstream table  X-Service-Catalog  built catalogs  failed reads
//   catalog update           91      100.0% of 873     97.7% of 260    4.6% of 262        2.2% of 510     0
//   project create           91      100.0% of 863     100.0% of 257   100.0% of 258      100.0% of 257   0
//   project update           84      24.7% of 760      100.0% of 225   100.0% of 226      100.0% of 225   0
//   user create              88      100.0% of 857     100.0% of 256   100.0% of 257      100.0% of 256   0
//   user update              80      20.0% of 813      100.0% of 244   100.0% of 245      100.0% of 244   0
//   mixed (1 in 10 catalog)  104     26.0% of 1292     97.7% of 396    54.3% of 396       62.6% of 577    0
//
// Token validations now survive catalog writes and new users and projects; a change of an existing
// user or project still drops them all (topics, not rows). The gateway's upstream table,
// X-Service-Catalog and the built catalogs survive every write but catalog writes.
import { gatewayWorld } from '../test/helpers/gateway.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 6);
const WRITES_PER_SECOND = Number(process.env.BENCH_WRITES_PER_SECOND ?? 20);
const READS_PER_SECOND = 100;
const WARM_UP_MS = 2000;

interface Counters {
  validationHits: number;
  validationMisses: number;
  gatewayRequests: number;
  upstreamLoads: number;
  headerHits: number;
  headerMisses: number;
  catalogHits: number;
  catalogMisses: number;
  writes: number;
  writeFailures: number;
  readFailures: number;
}

async function main(): Promise<void> {
  const teardowns: (() => unknown)[] = [];
  const shim = { teardown: (fn: () => unknown) => teardowns.push(fn) };
  try {
    const world = await gatewayWorld(shim, {
      GATEWAY_SERVICE_CATALOG_HEADER: 'true',
      AUTH_RATE_LIMIT_PER_ADDRESS: '0',
      AUTH_RATE_LIMIT_PER_USER: '0',
      // A loaded machine answers slowly: slowness must not open the upstream's circuit (every request refused).
      UPSTREAM_RESPONSE_TIMEOUT_MS: '30000',
    });
    const { testApp } = world;
    const { app, call, login } = testApp;
    // Internal-endpoint listings are the upstream table's reloads (nothing else lists them here).
    let upstreamLoads = 0;
    const listEndpoints = app.catalog.listEndpoints.bind(app.catalog);
    app.catalog.listEndpoints = (filter) => {
      if (filter.interface === 'internal') upstreamLoads++;
      return listEndpoints(filter);
    };
    const headerStats = (app.gateway as unknown as { catalogHeaders: { stats: { hits: number; misses: number } } }).catalogHeaders.stats;

    // Tokens to validate: the world's member and reader, and a few more members of its project.
    const roles = Object.fromEntries((await call('GET', '/v3/roles')).json().roles.map((r: { name: string; id: string }) => [r.name, r.id]));
    const tokens = [world.member, world.reader];
    for (let i = 0; i < 6; i++) {
      const user = (await call('POST', '/v3/users', { user: { name: `bench-reader-${i}`, password: 'Pw-1' } })).json().user;
      await call('PUT', `/v3/projects/${world.projectId}/users/${user.id}/roles/${roles.member}`);
      tokens.push((await login({ id: user.id }, 'Pw-1', { project: { id: world.projectId } })).token);
    }
    // Data the writes touch: nothing the tokens above depend on.
    const bystander = (await call('POST', '/v3/users', { user: { name: 'bench-bystander' } })).json().user;
    const unrelatedService = (await call('POST', '/v3/services', { service: { type: 'unrelated', name: 'unrelated' } })).json().service;
    let sequence = 0;
    const writes: Record<string, () => Promise<{ statusCode: number }>> = {
      'catalog update': () => call('PATCH', `/v3/services/${unrelatedService.id}`, { service: { description: `d${sequence++}` } }),
      'project create': () => call('POST', '/v3/projects', { project: { name: `bench-p-${sequence++}` } }),
      'project update': () => call('PATCH', `/v3/projects/${world.otherProjectId}`, { project: { description: `d${sequence++}` } }),
      'user create': () => call('POST', '/v3/users', { user: { name: `bench-u-${sequence++}` } }),
      'user update': () => call('PATCH', `/v3/users/${bystander.id}`, { user: { description: `d${sequence++}` } }),
    };
    const mixes: [string, (() => Promise<{ statusCode: number }>)[]][] = [
      ...Object.entries(writes).map(([name, write]) => [name, [write]] as [string, (() => Promise<{ statusCode: number }>)[]]),
      // Mostly users and projects, one catalog write in ten.
      ['mixed (1 in 10 catalog)', [writes['user create']!, writes['project update']!, writes['user update']!, writes['project create']!, writes['user create']!, writes['project update']!, writes['user update']!, writes['project create']!, writes['user create']!, writes['catalog update']!]],
    ];

    const gatewayUrl = `http://127.0.0.1:${world.port}/echo/v1/${world.projectId}/things`;
    const snapshot = (): Counters => ({
      validationHits: app.tokens.validationStats.cacheHits,
      validationMisses: app.tokens.validationStats.cacheMisses,
      gatewayRequests: 0,
      upstreamLoads,
      headerHits: headerStats.hits,
      headerMisses: headerStats.misses,
      catalogHits: app.catalog.cacheStats.hits,
      catalogMisses: app.catalog.cacheStats.misses,
      writes: 0,
      writeFailures: 0,
      readFailures: 0,
    });

    const failures = new Set<string>();
    const rows: string[][] = [['write mix', 'writes', 'token validation', 'upstream table', 'X-Service-Catalog', 'built catalogs', 'failed reads']];
    for (const [name, mix] of mixes) {
      const run = { writes: 0, writeFailures: 0, gatewayRequests: 0, readFailures: 0 };
      const pending = new Set<Promise<unknown>>();
      const track = (promise: Promise<unknown>) => {
        pending.add(promise);
        void promise.finally(() => pending.delete(promise));
      };
      let reads = 0;
      // Reads alone first: what the caches hold when the writes begin, and no stampede of first misses counted.
      const reader = setInterval(read, 1000 / READS_PER_SECOND);
      await new Promise((resolve) => setTimeout(resolve, WARM_UP_MS));
      const before = snapshot();
      run.gatewayRequests = 0;
      run.readFailures = 0;
      const writer = setInterval(() => {
        const write = mix[run.writes % mix.length]!;
        run.writes++;
        track(write().then((response) => (response.statusCode >= 300 ? run.writeFailures++ : 0), () => run.writeFailures++));
      }, 1000 / WRITES_PER_SECOND);
      function read(): void {
        const token = tokens[reads++ % tokens.length]!;
        track(
          call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': token }).then(
            (response) => {
              if (response.statusCode === 200) return;
              run.readFailures++;
              failures.add(`validation ${response.statusCode}`);
            },
            () => run.readFailures++,
          ),
        );
        run.gatewayRequests++;
        track(
          fetch(gatewayUrl, { headers: { 'x-auth-token': token } }).then(
            async (response) => {
              await response.arrayBuffer();
              if (response.status !== 200) {
                run.readFailures++;
                failures.add(`gateway ${response.status}`);
              }
            },
            () => run.readFailures++,
          ),
        );
      }
      await new Promise((resolve) => setTimeout(resolve, SECONDS * 1000));
      clearInterval(writer);
      clearInterval(reader);
      await Promise.all(pending);
      const after = snapshot();
      const rate = (hits: number, misses: number) => (hits + misses === 0 ? 'n/a' : `${((100 * hits) / (hits + misses)).toFixed(1)}% of ${hits + misses}`);
      const loads = after.upstreamLoads - before.upstreamLoads;
      rows.push([
        name,
        `${run.writes}${run.writeFailures ? ` (${run.writeFailures} failed)` : ''}`,
        rate(after.validationHits - before.validationHits, after.validationMisses - before.validationMisses),
        rate(run.gatewayRequests - loads, loads),
        rate(after.headerHits - before.headerHits, after.headerMisses - before.headerMisses),
        rate(after.catalogHits - before.catalogHits, after.catalogMisses - before.catalogMisses),
        String(run.readFailures),
      ]);
    }
    const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
    for (const row of rows) console.log(row.map((cell, column) => cell.padEnd(widths[column]!)).join('  '));
    if (failures.size > 0) console.log(`failed reads: ${[...failures].join(', ')}`);
  } finally {
    for (const stop of teardowns.reverse()) await stop();
  }
}

await main();
