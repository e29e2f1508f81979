import t from 'tap';
import { ingressTable, parseWrk } from '../../bench/ingress.ts';
import type { ScenarioResult } from '../../bench/load.ts';

// The ingress benchmark reads wrk's report: a misread unit would put the gateway 1000× off nginx.

const REPORT = `Running 2s test @ http://127.0.0.1:40123/v1/p/things
  1 threads and 32 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.29ms  343.36us    1.02s    88.43%
    Req/Sec    24.87k     1.39k   26.67k    80.00%
  Latency Distribution
     50%  812.00us
     75%    1.35ms
     90%    1.53ms
     99%    2.41ms
  49503 requests in 2.00s, 9.44MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 3
Requests/sec:  24707.93
Transfer/sec:      4.71MB
`;

t.test('a wrk --latency report', async (t) => {
  t.same(parseWrk(REPORT), {
    requests: 49503,
    durationS: 2,
    rps: 24751.5,
    latencyMs: { p50: 0.812, p99: 2.41, max: 1020 },
    non2xx: 3,
    socketErrors: 3,
  });
});

t.test('a clean report has no errors; minutes are read as minutes', async (t) => {
  const clean = REPORT.replace(/ {2}Socket errors.*\n/, '').replace(/ {2}Non-2xx.*\n/, '').replace('49503 requests in 2.00s', '600000 requests in 1.00m');
  t.match(parseWrk(clean), { requests: 600000, durationS: 60, rps: 10000, non2xx: 0, socketErrors: 0 });
});

t.test('anything else is refused, not read as zero', async (t) => {
  t.throws(() => parseWrk('unable to connect to 127.0.0.1:1 Connection refused\n'), /unreadable wrk output/);
});

t.test('BENCH_PERF_EVENTS=1: the table gives each target’s kernel events per request, medians over its rounds', async (t) => {
  const run = (cpu: number, events?: Record<string, number>) => ({
    requests: 1000, durationS: 1, rps: 1000, cpuUsPerRequest: cpu, kernelUsPerRequest: cpu / 2,
    latencyMs: { p50: 1, p99: 2, max: 3 }, non2xx: 0, socketErrors: 0,
    ...(events ? { kernelEventsPerRequest: events } : {}),
  });
  const summary = (cpu: number) => ({ cpuUsPerRequest: cpu, kernelUsPerRequest: cpu / 2, mainThreadUsPerRequest: cpu * 0.75, faultsPerRequest: cpu / 100, rps: 1000, cpuVsNginx: 1, rpsVsNginx: 1 });
  const table = ingressTable({
    settings: { threads: 1, connections: 32, durationS: 1, rounds: 3, pacedShare: 0, pacedDurationS: 1 },
    tools: { wrk: 'wrk 4', nginx: 'nginx 1' },
    rounds: {
      direct: [run(10), run(10), run(10)],
      nginx: [run(20, { syscalls: 4, wakeups: 2 }), run(20, { syscalls: 6, wakeups: 2 }), run(20, { syscalls: 5, wakeups: 3, madvise: 0.001 })],
      'bare-proxy': [run(40, { syscalls: 8, wakeups: 4 }), run(40, { syscalls: 9, wakeups: 4 }), run(40, { syscalls: 7, wakeups: 4 })],
      gateway: [run(80, { syscalls: 12, wakeups: 6, madvise: 0.5 }), run(80, { syscalls: 11, wakeups: 5, madvise: 0.5 }), run(80, { syscalls: 10, wakeups: 5, madvise: 0.25 })],
    },
    summary: { direct: summary(10), nginx: summary(20), 'bare-proxy': summary(40), gateway: summary(80) },
  });
  t.match(table, /target\s+CPU µs\/req\s+range\s+kernel\s+main\s+× nginx/, 'the main threads’ part beside the kernel’s');
  t.match(table, /gateway\s+80\.0\s+80\.0–80\.0\s+40\.0\s+60\.0\s/);
  t.match(table, /minor page faults per request \(median\): direct 0\.1, nginx 0\.2, bare-proxy 0\.4, gateway 0\.8\n/, 'page faults per request, each target');
  const section = table.slice(table.indexOf('kernel events per request'));
  t.match(section, /event\s+nginx\s+bare-proxy\s+gateway\n/, 'a column for each target counted (direct was not)');
  t.match(section, /syscalls\s+5\.00\s+8\.00\s+11\.00/);
  t.match(section, /wakeups\s+2\.00\s+4\.00\s+5\.00/);
  t.match(section, /madvise\s+0\.00\s+-\s+0\.50/, 'an event shown when one target had 0.01 or more; "-" where perf did not count it');
  t.notMatch(ingressTable({ ...JSON.parse(JSON.stringify({ settings: { threads: 1, connections: 32, durationS: 1, rounds: 1, pacedShare: 0, pacedDurationS: 1 }, tools: { wrk: 'w', nginx: 'n' } })), rounds: { direct: [run(10)], nginx: [run(20)], 'bare-proxy': [run(40)], gateway: [run(80)] }, summary: { direct: summary(10), nginx: summary(20), 'bare-proxy': summary(40), gateway: summary(80) } }), /kernel events/, 'none counted: no section');
});

t.test('the paced report: the generator’s lateness, the kernel threads, the requests over 10 ms', async (t) => {
  const run = { requests: 1000, durationS: 1, rps: 1000, cpuUsPerRequest: 10, kernelUsPerRequest: 5, latencyMs: { p50: 1, p99: 2, max: 3 }, non2xx: 0, socketErrors: 0 };
  const summary = { cpuUsPerRequest: 10, kernelUsPerRequest: 5, mainThreadUsPerRequest: 7, rps: 1000, cpuVsNginx: 1, rpsVsNginx: 1 };
  const paced = (name: string, p99: number, extra: Partial<ScenarioResult>): ScenarioResult => ({
    name, request: 'GET /', measures: name, durationS: 10, requests: 5000, sent: 5000, rps: 500,
    latencyMs: { p50: 0.2, p90: 0.5, p99, max: p99 * 2 }, statusCodes: { '200': 5000 }, non2xx: 0, errors: 0, timeouts: 0, errorSamples: [], cpuUsPerRequest: {},
    ...extra,
  });
  const table = ingressTable({
    settings: { threads: 1, connections: 32, durationS: 1, rounds: 1, pacedShare: 0.5, pacedDurationS: 10 },
    tools: { wrk: 'wrk 4', nginx: 'nginx 1' },
    rounds: { direct: [run], nginx: [run], 'bare-proxy': [run], gateway: [run] },
    summary: { direct: summary, nginx: summary, 'bare-proxy': summary, gateway: summary },
    paced: {
      rate: 500,
      generator: 'bench/paced.c',
      isolated: true,
      results: {
        direct: paced('direct', 1, { generatorLagMs: { sends: 4000, sendP99: 0.3, sendMax: 4, reads: 5000, readP99: 0.1, readMax: 2 }, arrivalLatencyMs: { p50: 0.1, p99: 0.9, max: 2 }, kernelThreads: [] }),
        nginx: paced('nginx', 3, { generatorLagMs: { sends: 4000, reads: 0 }, kernelThreads: [{ name: 'kdamond.0', runMs: 120.4, waitMs: 9.6, wakeups: 21 }], stolenMs: [10, 70] }),
        gateway: paced('gateway', 9, { overTenMs: 40, inServiceMs: { requests: 6000, p50AtMost: 0.5, p99AtMost: 2.5, overTenMs: 3 }, cpuUsPerRequest: { service: 17 }, kernelUsPerRequest: 9,
          placement: {
            all: { slots: 1000, samples: 10_000, behindGeneratorPercent: 4.2, besideUpstreamPercent: 1.5, runMsPerSlot: 7.4, waitMsPerSlot: 0.6 },
            queueBuilding: { slots: 12, samples: 120, behindGeneratorPercent: 61.7, besideUpstreamPercent: 8.3, runMsPerSlot: 6.1, waitMsPerSlot: 3.9 },
          },
          cpuHolders: {
            all: { waitMs: 580.2, otherCpuIdleMs: 409.5, holders: [{ who: 'upstream (nginx)', ms: 391.9 }, { who: 'generator', ms: 74.3 }] },
            queueBuilding: { waitMs: 0, otherCpuIdleMs: 0, holders: [] },
            lostChunks: 2,
          } }),
      },
      gatewayAddedP99Ms: 8,
    },
  });
  // Paced, a request often has an event-loop turn to itself: its CPU beside the same target's under wrk.
  t.match(table, /paced by bench\/paced\.c[^\n]*\n\ntarget\s+p50 ms\s+p99 ms\s+max ms\s+non-2xx\s+errors\s+CPU µs\/req\s+kernel\s+× wrk\n/, 'the paced table has the CPU columns');
  t.match(table, /\ngateway\s+0\.20\s+9\.00\s+18\.00\s+0\s+0\s+17\.0\s+9\.0\s+1\.70×\n/, "the gateway's paced CPU, its kernel part, and its ratio to its wrk cost (10 µs)");
  t.match(table, /\ndirect\s+0\.20\s+1\.00\s+2\.00\s+0\s+0\s+-\s+-\s+-\n/, 'none measured: dashes, not zeros');
  const lateness = table.slice(table.indexOf("the generator's own lateness"), table.indexOf("the host's busiest kernel threads"));
  t.match(lateness, /direct\s+0\.30\s+4\.00\s+0\.10\s+2\.00\s+0\.90\n/, 'lateness and the p99 at receipt');
  t.match(lateness, /nginx\s+-\s+-\s+-\s+-\s+-\n/, 'no quantile where nothing was measured, not a zero');
  t.notMatch(lateness, /gateway/, 'no lateness row for a run without one');
  const kernelThreads = table.slice(table.indexOf("the host's busiest kernel threads"), table.indexOf('gateway\'s added p99'));
  t.match(kernelThreads, /direct\s+none over 1 ms\n/, 'kernel threads seen, none busy');
  t.match(kernelThreads, /nginx\s+kdamond\.0 120 \/ 10 \/ 21\n/);
  t.notMatch(kernelThreads, /gateway/, 'none seen at all: no row');
  const steal = table.slice(table.indexOf("the host's steal time"), table.indexOf("gateway's added p99"));
  t.match(steal, /ms per CPU\n\nnginx\s+cpu0 10, cpu1 70\n/, 'steal per CPU for a run that read it');
  t.notMatch(steal, /\n(direct|gateway)\s/, 'a run without the figures has no row');
  t.match(table, /added p99 \(gateway p99 − direct p99\): 8 ms; 40 of its paced requests took over 10 ms as the generator counts/);
  t.match(table, /p99 ≤ 2\.5 ms \(histogram buckets, 6000 requests\), 3 over 10 ms \(warm-up included\)/);
  const placement = table.slice(table.indexOf("where each target's main threads waited"));
  t.match(placement, /\ntarget\s+all slots\s+slots where a queue built up\ngateway\s+4\.2 \/ 1\.5 %; 7\.4 \/ 0\.6 ms\s+61\.7 \/ 8\.3 %; 6\.1 \/ 3\.9 ms \(12 slots\)(\n|$)/, 'where the main threads waited, overall and while a queue built');
  t.notMatch(placement, /\n(direct|nginx)\s/, 'a run not sampled has no row');
  t.match(table, /% of the gateway's median top rate; each target's main threads alone on the last CPU, the generator and its upstream on the others \(BENCH_PACED_ISOLATE\)\):/, 'an isolated run says so');
  const holders = table.slice(table.indexOf('who held the CPU'));
  t.match(holders, /\ngateway\s+all slots: 580\.2 ms waited, 409\.5 idle elsewhere; upstream \(nginx\) 391\.9, generator 74\.3\n\s+where a queue built up: 0 ms waited, 0 idle elsewhere; nothing\n\s+perf lost 2 buffers of events: these figures are short(\n|$)/, 'what held the CPU, and what perf lost');
  t.notMatch(holders, /\n(direct|nginx)\s/, 'a run not recorded has no row');
});

t.test('page faults per request print with three decimals: a median of two rounds is not 0.013999999999999999', async (t) => {
  const run = { requests: 1000, durationS: 1, rps: 1000, cpuUsPerRequest: 10, latencyMs: { p50: 1, p99: 2, max: 3 }, non2xx: 0, socketErrors: 0 };
  const summary = (faults: number) => ({ cpuUsPerRequest: 10, faultsPerRequest: faults, rps: 1000, cpuVsNginx: 1, rpsVsNginx: 1 });
  const table = ingressTable({
    settings: { threads: 1, connections: 32, durationS: 1, rounds: 2, pacedShare: 0, pacedDurationS: 1 },
    tools: { wrk: 'wrk 4', nginx: 'nginx 1' },
    rounds: { direct: [run, run], nginx: [run, run], 'bare-proxy': [run, run], gateway: [run, run] },
    summary: { direct: summary(0), nginx: summary(0), 'bare-proxy': summary(0.0035), gateway: summary((0.007 + 0.021) / 2) },
  });
  t.match(table, /minor page faults per request \(median\): direct 0, nginx 0, bare-proxy 0\.004, gateway 0\.014$/m);
});
