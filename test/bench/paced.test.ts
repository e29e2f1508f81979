import { spawn } from 'node:child_process';
import { chmodSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import { compilePaced, placementOf, runExternalPaced } from '../../bench/paced.ts';
import { cleanup, tempDirectory } from '../../bench/processes.ts';

// bench/paced.c times the gateway's tail: it must read every answer whole (Content-Length, chunked,
// none), count statuses, and charge a stall to every request scheduled behind it (open loop).

t.teardown(() => cleanup());
const compiled = compilePaced();

async function server(t: Test, handler: http.RequestListener): Promise<string> {
  const listening = http.createServer({ keepAliveTimeout: 60_000 }, handler);
  await new Promise<void>((resolve) => listening.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => listening.close(() => resolve())));
  return `http://127.0.0.1:${(listening.address() as AddressInfo).port}`;
}

const settings = { duration: 1, warmup: 0.2, connections: 4, timeout: 5 };
const target = (url: string) => ({ name: 'test', measures: 'test', url, headers: { 'x-auth-token': 'abc' }, role: 'service' as const, pids: [process.pid] });

t.test('every answer read whole, whatever its framing; statuses counted', async (t) => {
  if (!('binary' in compiled)) return t.fail(compiled.unavailable);
  const seen = { requests: 0, token: new Set<string>() };
  const base = await server(t, (request, response) => {
    seen.requests++;
    seen.token.add(String(request.headers['x-auth-token']));
    if (request.url === '/chunked') {
      response.write('a'.repeat(3000));
      setImmediate(() => response.end('b'.repeat(70_000)));
    } else if (request.url === '/empty') {
      response.writeHead(204).end();
    } else if (request.url === '/mixed') {
      response.writeHead(seen.requests % 2 ? 200 : 404, { 'content-type': 'text/plain' }).end('x'.repeat(100));
    } else {
      response.writeHead(200, { 'content-length': '5' }).end('hello');
    }
  });
  for (const path of ['/length', '/chunked', '/empty']) {
    const result = await runExternalPaced(compiled.binary, target(`${base}${path}`), settings, 200);
    t.equal(result.errors, 0, `${path}: no errors`);
    t.ok(result.requests >= 195 && result.requests <= 205, `${path}: ~200 answered in the measured second (${result.requests})`);
    t.equal(result.requests, result.sent, `${path}: every one sent was answered`);
    t.same(Object.keys(result.statusCodes), [path === '/empty' ? '204' : '200'], path);
  }
  const mixed = await runExternalPaced(compiled.binary, target(`${base}/mixed`), settings, 200);
  t.equal(mixed.non2xx + (mixed.statusCodes['200'] ?? 0), mixed.requests, 'statuses add up');
  t.ok(mixed.non2xx > 50, `404s counted as non-2xx (${mixed.non2xx})`);
  t.same([...seen.token], ['abc'], 'the request as written, headers included');
});

t.test('a stall is charged to every request scheduled during it (latency from the scheduled time)', async (t) => {
  if (!('binary' in compiled)) return t.fail(compiled.unavailable);
  let stalled = false;
  // Timed from the first request the generator sends (the warm-up's start), not from here: the run
  // first waits for this process's CPU to settle, which takes longer on a loaded machine, and a
  // stall during the warm-up is rightly not counted.
  let firstRequest: number | undefined;
  const base = await server(t, (_request, response) => {
    firstRequest ??= performance.now();
    // 400 ms into the measured second (after the 200 ms warm-up).
    if (!stalled && performance.now() - firstRequest > 600) {
      stalled = true;
      // The whole server held up for 200 ms, as a long GC pause would.
      const until = performance.now() + 200;
      while (performance.now() < until);
    }
    response.end('ok');
  });
  const result = await runExternalPaced(compiled.binary, target(base), { ...settings, warmup: 0.2 }, 500);
  t.equal(result.errors, 0);
  // ~100 of ~500 requests were scheduled during the stall: the p90 shows it; a closed-loop
  // generator would have charged it to the 4 requests in flight only.
  t.ok(result.latencyMs.max >= 150, `max ${result.latencyMs.max} ms`);
  t.ok(result.latencyMs.p90 >= 20, `p90 ${result.latencyMs.p90} ms`);
  t.ok(result.latencyMs.p50 < 20, `p50 ${result.latencyMs.p50} ms`);
  // The stall is the server's: counted to the kernel's receipt of the answers, it is still there,
  // and no request's latency to its receipt exceeds its latency to the generator's read.
  const receipt = result.arrivalLatencyMs;
  t.ok(receipt && receipt.max >= 150, `max at receipt ${receipt?.max} ms`);
  t.ok(receipt && receipt.p99 <= result.latencyMs.p99 && receipt.p50 <= result.latencyMs.p50, 'receipt before read');
  t.ok(result.overTenMs !== undefined && result.overTenMs >= 50 && result.overTenMs < result.requests * 0.6, `the stalled requests counted over 10 ms (${result.overTenMs})`);
  const lag = result.generatorLagMs;
  t.equal(lag?.reads, result.requests, 'every answer read with a receive timestamp');
  t.ok(lag && lag.sends > 0 && lag.sends <= result.sent, `sends on a free connection counted (${lag?.sends} of ${result.sent})`);
});

t.test('the receipt is the last segment’s: an answer whose body comes 50 ms after its head', async (t) => {
  if (!('binary' in compiled)) return t.fail(compiled.unavailable);
  const base = await server(t, (_request, response) => {
    response.writeHead(200, { 'content-length': '2' });
    response.flushHeaders();
    setTimeout(() => response.end('ok'), 50);
  });
  const result = await runExternalPaced(compiled.binary, target(base), { ...settings, connections: 8 }, 40);
  t.equal(result.errors, 0);
  t.ok(result.arrivalLatencyMs && result.arrivalLatencyMs.p50 >= 45, `p50 at receipt ${result.arrivalLatencyMs?.p50} ms (the head alone came at once)`);
});

/** The pid of the running generator (its executable is the compiled binary). */
function generatorPid(binary: string): number | undefined {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readlinkSync(`/proc/${entry}/exe`) === binary) return Number(entry);
    } catch {
      // gone, or not ours to read
    }
  }
  return undefined;
}

t.test('the generator’s own lateness: stopped for 150 ms, it sends late and reads late', async (t) => {
  if (!('binary' in compiled)) return t.fail(compiled.unavailable);
  let stopped: number | undefined;
  let firstRequest: number | undefined;
  const resume = (pid: number) => {
    try {
      process.kill(pid, 'SIGCONT');
    } catch {
      // already gone
    }
  };
  // Whatever happens, the generator is not left stopped.
  t.teardown(() => stopped && resume(stopped));
  const base = await server(t, (_request, response) => {
    firstRequest ??= performance.now();
    // 400 ms into the measured second: the generator is stopped before this answer is written, so
    // the kernel has it 150 ms before the generator can read it, and what falls due meanwhile is sent late.
    if (stopped === undefined && performance.now() - firstRequest > 600) {
      stopped = generatorPid(compiled.binary) ?? 0;
      if (stopped) {
        process.kill(stopped, 'SIGSTOP');
        const pid = stopped;
        setTimeout(() => resume(pid), 150);
      }
    }
    response.end('ok');
  });
  // Connections to spare: a request that falls due while every connection is busy waits for one
  // and is not a late send of the generator's own (on a loaded machine 4 were all busy at times).
  const result = await runExternalPaced(compiled.binary, target(base), { ...settings, connections: 32 }, 200);
  t.ok(stopped, 'the generator was found and stopped');
  t.equal(result.errors, 0);
  const lag = result.generatorLagMs;
  t.ok(lag?.readMax !== undefined && lag.readMax >= 100, `an answer read late (${lag?.readMax} ms)`);
  t.ok(lag?.sendMax !== undefined && lag.sendMax >= 100, `requests sent late (${lag?.sendMax} ms)`);
  t.ok(result.arrivalLatencyMs && result.arrivalLatencyMs.p50 < 20, `most answers were not late at receipt (p50 ${result.arrivalLatencyMs?.p50} ms)`);
});

t.test('the scheduler’s view: the server’s threads, its upstream’s, the generator’s own', async (t) => {
  if (!('binary' in compiled)) return t.fail(compiled.unavailable);
  const base = await server(t, (_request, response) => {
    // 1 ms of CPU per request on this process's main thread: 200 requests ran ≥ 200 ms. (Counted in
    // the thread's CPU time, not the wall clock: on a loaded machine it may be preempted mid-spin.)
    const start = process.threadCpuUsage();
    for (;;) {
      const used = process.threadCpuUsage(start);
      if (used.user + used.system >= 1000) break;
    }
    response.end('ok');
  });
  const result = await runExternalPaced(compiled.binary, { ...target(base), upstreamPids: [process.pid] }, settings, 200);
  t.equal(result.errors, 0);
  t.ok(result.scheduler && result.scheduler.main.runMs >= 200, `the server's main thread ran (${result.scheduler?.main.runMs} ms)`);
  t.ok(result.upstreamScheduler && result.upstreamScheduler.main.runMs >= 200, 'the upstream, read over the same run');
  // Each answer costs the server ≥ 1 ms of CPU (its clock read in a loop: user and system time).
  const cpu = result.cpuUsPerRequest.service ?? 0;
  t.ok(cpu >= 800, `the server's CPU per request (${cpu} µs)`);
  t.ok(result.kernelUsPerRequest !== undefined && result.kernelUsPerRequest >= 0 && result.kernelUsPerRequest <= cpu, `of it in the kernel: ${result.kernelUsPerRequest} µs`);
  const generator = result.generatorScheduler;
  t.ok(generator && generator.runMs > 0 && generator.waitMs >= 0 && generator.preempted >= 0, `paced.c reports its own (${JSON.stringify(generator)})`);
  t.ok(generator && generator.runMs < result.scheduler!.main.runMs, 'its own, not the server’s');

  const direct = await runExternalPaced(compiled.binary, target(base), settings, 200);
  t.equal(direct.upstreamScheduler, undefined, 'no upstream named, none read');
});

/**
 * A server in its own process, pinned to `cpu`, whose main thread spins from its first request for
 * BUSY_MS (answering between 5 ms spins), then idles; with UPSTREAM, its first request also starts
 * that one spinning. Idle before and after, so the run's settling around it ends.
 */
async function busyServer(t: Test, cpu: number, upstream?: string): Promise<{ url: string; pid: number }> {
  const source = `
    const http = require('node:http');
    let busyUntil = 0;
    const spin = () => { const end = Date.now() + 5; while (Date.now() < end); if (Date.now() < busyUntil) setImmediate(spin); };
    http.createServer((request, response) => {
      if (!busyUntil) {
        busyUntil = Date.now() + 1500;
        if (process.env.UPSTREAM) http.get(process.env.UPSTREAM, (answer) => answer.resume());
        setImmediate(spin);
      }
      response.end('ok');
    }).listen(0, '127.0.0.1', function () { console.log(this.address().port); });`;
  const child = spawn('taskset', ['-c', String(cpu), process.execPath, '-e', source], { env: { ...process.env, UPSTREAM: upstream ?? '' }, stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => void child.kill('SIGKILL'));
  const port = await new Promise<string>((resolve, reject) => {
    child.stdout.once('data', (chunk: Buffer) => resolve(chunk.toString().trim()));
    child.once('error', reject);
  });
  return { url: `http://127.0.0.1:${port}`, pid: child.pid! };
}

t.test('where the server waited: behind the generator on its CPU, or beside its upstream (BENCH_PACED_TIMELINE)', async (t) => {
  if (!('binary' in compiled)) return t.fail(compiled.unavailable);
  t.ok(os.availableParallelism() >= 2, 'two CPUs at least (the machines have two)');
  const directory = tempDirectory('kg-paced-placement-');
  // The generator pinned to CPU 0 by a wrapper, so that where the servers wait is known.
  const pinned = path.join(directory, 'paced-on-cpu0');
  writeFileSync(pinned, `#!/bin/sh\nexec taskset -c 0 '${compiled.binary}' "$@"\n`);
  chmodSync(pinned, 0o755);
  const previous = process.env.BENCH_PACED_TIMELINE;
  process.env.BENCH_PACED_TIMELINE = path.join(directory, 'timeline');
  t.teardown(() => {
    if (previous === undefined) delete process.env.BENCH_PACED_TIMELINE;
    else process.env.BENCH_PACED_TIMELINE = previous;
  });

  const sharing = await busyServer(t, 0);
  const shared = await runExternalPaced(pinned, { ...target(sharing.url), name: 'shared', pids: [sharing.pid] }, settings, 200);
  t.ok(shared.placement, 'reported when the timeline is asked for');
  t.ok(shared.placement!.all.samples >= 500, `sampled each ms of the measured second (${shared.placement!.all.samples})`);
  t.ok(shared.placement!.all.behindGeneratorPercent >= 50, `a server spinning on the generator's CPU waits behind it (${shared.placement!.all.behindGeneratorPercent} %)`);
  t.equal(shared.placement!.all.besideUpstreamPercent, 0, 'no upstream, none beside');
  const columns = readFileSync(`${process.env.BENCH_PACED_TIMELINE}-shared`, 'utf8').split('\n')[1]!.split(' ');
  t.equal(columns.length, 8, 'the timeline has the samples and the times beside each slot');
  // Always runnable, the spinning server either ran or waited for the CPU through each 10 ms slot
  // (how it splits depends on what else the machine runs, e.g. the rest of the suite).
  const { runMsPerSlot, waitMsPerSlot } = shared.placement!.all;
  t.ok(runMsPerSlot > 0 && runMsPerSlot + waitMsPerSlot >= 8, `it ran or waited through each slot (${runMsPerSlot} + ${waitMsPerSlot} ms)`);

  const upstream = await busyServer(t, 1);
  const apart = await busyServer(t, 1, upstream.url);
  const beside = await runExternalPaced(pinned, { ...target(apart.url), name: 'beside', pids: [apart.pid], upstreamPids: [upstream.pid] }, settings, 200);
  t.ok(beside.placement!.all.behindGeneratorPercent <= 5, `a server on the other CPU is not behind the generator (${beside.placement!.all.behindGeneratorPercent} %)`);
  t.ok(beside.placement!.all.besideUpstreamPercent >= 50, `it shares that CPU with its spinning upstream (${beside.placement!.all.besideUpstreamPercent} %)`);
  t.ok(beside.placement!.all.waitMsPerSlot >= 2, `half of that CPU went to the upstream: it waited (${beside.placement!.all.waitMsPerSlot} ms per slot)`);
  // A wake-up each ms of the window, not a spin: the warm-up (0.2 s) and the measured second cost it little.
  t.ok(beside.generatorScheduler!.runMs < 120, `the generator's own CPU over the run (${beside.generatorScheduler!.runMs} ms)`);

  delete process.env.BENCH_PACED_TIMELINE;
  const plain = await runExternalPaced(pinned, target(apart.url), settings, 200);
  t.equal(plain.placement, undefined, 'without the timeline, not sampled');
});

t.test('placementOf: the shares over all slots and over those where a queue built up', async (t) => {
  const timeline = [
    '# header',
    // slot, requests, worst ms, samples, behind the generator, beside the upstream, µs ran, µs waited
    '1000 2 0.5 10 0 0 8000 0',
    '1010 2 3.0 10 10 0 5000 5000', // +2.5 ms: building, all behind
    '1020 2 2.0 10 0 5 10000 0', // draining
    '1030 2 3.5 10 0 10 6000 3000', // +1.5 ms: building, all beside
    '1040 2 4.0 10 0 0 9000 500', // +0.5 ms: not counted as building
  ].join('\n');
  t.same(placementOf(timeline), {
    all: { slots: 5, samples: 50, behindGeneratorPercent: 20, besideUpstreamPercent: 30, runMsPerSlot: 7.6, waitMsPerSlot: 1.7 },
    queueBuilding: { slots: 2, samples: 20, behindGeneratorPercent: 50, besideUpstreamPercent: 50, runMsPerSlot: 5.5, waitMsPerSlot: 4 },
  });
  t.equal(placementOf('# header\n1000 2 0.5\n'), undefined, 'a timeline without PACED_WATCH has none');
});

t.test('BENCH_PACED_ISOLATE: the server’s main thread alone on the last CPU, the generator and the upstream on the others, for the run only', async (t) => {
  if (!('binary' in compiled)) return t.fail(compiled.unavailable);
  const cpus = os.availableParallelism();
  if (cpus < 2) return t.fail(`one CPU here (${cpus}): nothing to isolate on`);
  const [last, rest, all] = [String(cpus - 1), cpus > 2 ? `0-${cpus - 2}` : '0', `0-${cpus - 1}`];
  const allowed = (pid: number, tid = pid) => /Cpus_allowed_list:\s*(\S+)/.exec(readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8'))![1];
  // The upstream: any process with threads of its own (all of them are pinned).
  const upstream = spawn(process.execPath, ['-e', "new (require('node:worker_threads').Worker)('setInterval(() => {}, 1000)', { eval: true }); setInterval(() => {}, 1000)"], { stdio: 'ignore' });
  t.teardown(() => void upstream.kill('SIGKILL'));
  await new Promise((resolve) => setTimeout(resolve, 300));
  // A server that answers 200 only while it, the upstream and the generator are where they should be.
  const source = `
    const fs = require('node:fs');
    const allowed = (pid, tid = pid) => /Cpus_allowed_list:\\s*(\\S+)/.exec(fs.readFileSync('/proc/' + pid + '/task/' + tid + '/status', 'utf8'))[1];
    const wrong = () => {
      if (allowed(process.pid) !== process.env.LAST) return 'server on ' + allowed(process.pid);
      for (const tid of fs.readdirSync('/proc/' + process.env.UPSTREAM + '/task')) if (allowed(process.env.UPSTREAM, tid) !== process.env.REST) return 'upstream thread on ' + allowed(process.env.UPSTREAM, tid);
      const generators = fs.readdirSync('/proc').filter((pid) => /^\\d+$/.test(pid) && (() => { try { return fs.readFileSync('/proc/' + pid + '/comm', 'utf8').trim() === 'paced'; } catch { return false; } })());
      if (generators.length !== 1 || allowed(generators[0]) !== process.env.REST) return 'generator ' + generators.map((pid) => allowed(pid)).join(',');
      return '';
    };
    require('node:http').createServer((request, response) => {
      const reason = wrong();
      if (reason) process.stderr.write(reason + '\\n');
      response.statusCode = reason ? 500 : 200;
      response.end(reason);
    }).listen(0, '127.0.0.1', function () { console.log(this.address().port); });`;
  const server = spawn(process.execPath, ['-e', source], { env: { ...process.env, LAST: last, REST: rest, UPSTREAM: String(upstream.pid) }, stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => void server.kill('SIGKILL'));
  const port = await new Promise<string>((resolve) => server.stdout.once('data', (chunk: Buffer) => resolve(chunk.toString().trim())));
  t.equal(allowed(server.pid!), all, 'before the run, the server may run anywhere');

  process.env.BENCH_PACED_ISOLATE = '1';
  t.teardown(() => void delete process.env.BENCH_PACED_ISOLATE);
  const result = await runExternalPaced(compiled.binary, { name: 'isolated', measures: 'test', url: `http://127.0.0.1:${port}`, headers: {}, role: 'service', pids: [server.pid!], upstreamPids: [upstream.pid!] }, settings, 100);
  t.ok(result.requests > 50, `${result.requests} answered`);
  t.same(result.statusCodes, { 200: result.requests }, 'every answer found the server, the upstream and the generator where they should be');
  t.equal(allowed(server.pid!), all, 'after the run, the server is free again');
  for (const tid of readdirSync(`/proc/${upstream.pid}/task`)) t.equal(allowed(upstream.pid!, Number(tid)), all, `and the upstream's thread ${tid}`);
});
