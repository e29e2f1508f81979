/**
 * What node:http's request front costs a proxy: nginx as a bare proxy, bench/bare-proxy.ts
 * (node:http in front of the gateway's upstream client) and bench/raw-front-proxy.ts (the same
 * upstream client behind a net server and node's own llhttp binding), each under wrk in turn (the
 * order rotating each round), CPU µs per request from /proc with its kernel part. An experiment for
 * issue 21 item 3, not a scenario of `npm run bench`; prints its raw figures as JSON at the end:
 *   tsx bench/front-experiment.ts        (BENCH_WRK_ROUNDS=3, BENCH_WRK_DURATION=5)
 */
import { cleanup, cpuTimes, installSignalHandlers, settle, startHelper, type HelperProcess } from './processes.ts';
import { parseWrk, startNginx, wrk } from './ingress.ts';

const rounds = Number(process.env.BENCH_WRK_ROUNDS ?? 3);
const seconds = Number(process.env.BENCH_WRK_DURATION ?? 5);
const path = '/v1/project/things';

const headers = { 'X-Auth-Token': '0123456789abcdef0123456789abcdef' };
const wrkRun = (url: string, durationS: number) => wrk(`${url}${path}`, headers, 1, 32, durationS);

installSignalHandlers(() => {});
try {
  const upstream = await startNginx('upstream');
  const targets: [string, HelperProcess][] = [
    ['nginx', await startNginx('proxy', Number(new URL(upstream.url).port))],
    ['node:http front (bare-proxy.ts)', await startHelper('bare-proxy.ts', [upstream.url])],
    ['net + llhttp front (raw-front-proxy.ts)', await startHelper('raw-front-proxy.ts', [upstream.url])],
  ];
  const pids = [upstream.pid, ...targets.map(([, target]) => target.pid)];
  for (const [name, target] of targets) {
    const response = await fetch(`${target.url}${path}`);
    if (response.status !== 200) throw new Error(`${name} answered ${response.status}`);
    await wrkRun(target.url, 2); // warm-up
  }
  const runs: { round: number; target: string; us: number; kernelUs: number; rps: number; p99Ms: number }[] = [];
  for (let round = 1; round <= rounds; round++) {
    const order = [...targets.slice((round - 1) % targets.length), ...targets.slice(0, (round - 1) % targets.length)];
    for (const [name, target] of order) {
      await settle(pids);
      const before = cpuTimes([target.pid]);
      const run = parseWrk(await wrkRun(target.url, seconds));
      await settle(pids);
      const after = cpuTimes([target.pid]);
      if (run.requests === 0 || run.non2xx > 0 || run.socketErrors > 0) throw new Error(`${name}: ${run.requests} requests, ${run.non2xx} non-2xx, ${run.socketErrors} socket errors`);
      const us = ((after.userMs + after.systemMs - before.userMs - before.systemMs) * 1000) / run.requests;
      const kernelUs = ((after.systemMs - before.systemMs) * 1000) / run.requests;
      runs.push({ round, target: name, us: Math.round(us * 10) / 10, kernelUs: Math.round(kernelUs * 10) / 10, rps: Math.round(run.rps), p99Ms: run.latencyMs.p99 });
      console.log(`round ${round} ${name}: ${us.toFixed(1)} µs/req (${kernelUs.toFixed(1)} in the kernel), ${Math.round(run.rps)} req/s, p99 ${run.latencyMs.p99} ms`);
    }
    const nginx = runs.find((run) => run.round === round && run.target === 'nginx')!;
    for (const run of runs.filter((run) => run.round === round && run.target !== 'nginx')) console.log(`round ${round} ${run.target}: ${(run.us / nginx.us).toFixed(2)}× nginx's CPU, ${Math.round((run.rps / nginx.rps) * 100)} % of its req/s`);
  }
  console.log(JSON.stringify(runs));
} finally {
  await cleanup();
}
