import t from 'tap';
import { parseWrk } from '../../bench/ingress.ts';

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
