/**
 * What node:http's request front costs a proxy: nginx as a bare proxy, bench/bare-proxy.ts
 * (node:http in front of the gateway's upstream client) and bench/raw-front-proxy.ts (the same
 * upstream client behind a net server and node's own llhttp binding), each under wrk in turn, CPU µs
 * per request from /proc. An experiment for issue 21 item 3, not a scenario of `npm run bench`:
 *   tsx bench/front-experiment.ts        (ROUNDS=3, SECONDS=5)
 */
import { spawn } from 'node:child_process';
import { cleanup, cpuTimes, startHelper, type HelperProcess } from './processes.ts';
import { parseWrk, startNginx } from './ingress.ts';

const rounds = Number(process.env.ROUNDS ?? 3);
const seconds = Number(process.env.SECONDS ?? 5);
const path = '/v1/project/things';

function wrk(url: string, durationS: number): Promise<string> {
  const args = ['-t1', '-c32', `-d${durationS}s`, '--latency', '-H', 'X-Auth-Token: 0123456789abcdef0123456789abcdef', `${url}${path}`];
  return new Promise((resolve, reject) => {
    const child = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve(output) : reject(new Error(`wrk exited ${code}`))));
  });
}

try {
  const upstream = await startNginx('upstream');
  const targets: [string, HelperProcess][] = [
    ['nginx', await startNginx('proxy', Number(new URL(upstream.url).port))],
    ['node:http front (bare-proxy.ts)', await startHelper('bare-proxy.ts', [upstream.url])],
    ['net + llhttp front (raw-front-proxy.ts)', await startHelper('raw-front-proxy.ts', [upstream.url])],
  ];
  for (const [name, target] of targets) {
    const response = await fetch(`${target.url}${path}`);
    if (response.status !== 200) throw new Error(`${name} answered ${response.status}`);
    await wrk(target.url, 2); // warm-up
  }
  for (let round = 1; round <= rounds; round++) {
    let nginxUs = 0;
    for (const [name, target] of targets) {
      const before = cpuTimes([target.pid]);
      const run = parseWrk(await wrk(target.url, seconds));
      const after = cpuTimes([target.pid]);
      const us = ((after.userMs + after.systemMs - before.userMs - before.systemMs) * 1000) / run.requests;
      const kernelUs = ((after.systemMs - before.systemMs) * 1000) / run.requests;
      if (name === 'nginx') nginxUs = us;
      console.log(`round ${round} ${name}: ${us.toFixed(1)} µs/req (${kernelUs.toFixed(1)} in the kernel; ${(us / nginxUs).toFixed(2)}× nginx), ${Math.round(run.rps)} req/s, p99 ${run.latencyMs.p99} ms`);
    }
  }
} finally {
  await cleanup();
}
