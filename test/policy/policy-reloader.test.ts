import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { GatewayPolicy } from '../../src/policy/gateway-policy.ts';
import type { PolicyRequest } from '../../src/policy/gateway-policy-types.ts';
import { PolicyLoadError } from '../../src/policy/policy-files.ts';
import { PolicyReloader, type PolicyReloaderLog } from '../../src/policy/policy-reloader.ts';
import { policyDirectory, ruleFile, shippedModel, writePolicyFiles } from './policy-directory.ts';

interface LogEntry {
  level: 'info' | 'error';
  fields: Record<string, unknown>;
  message: string;
}

/** Captures log lines and lets a test await the next one of a level. */
class RecordingLog implements PolicyReloaderLog {
  readonly entries: LogEntry[] = [];
  private readonly waiting: { level: LogEntry['level']; resolve: (entry: LogEntry) => void }[] = [];

  info(fields: object, message: string): void {
    this.record({ level: 'info', fields: fields as Record<string, unknown>, message });
  }

  error(fields: object, message: string): void {
    this.record({ level: 'error', fields: fields as Record<string, unknown>, message });
  }

  errors(): LogEntry[] {
    return this.entries.filter((entry) => entry.level === 'error');
  }

  next(level: LogEntry['level']): Promise<LogEntry> {
    return new Promise((resolve) => this.waiting.push({ level, resolve }));
  }

  private record(entry: LogEntry): void {
    this.entries.push(entry);
    for (const waiter of this.waiting.filter((waiter) => waiter.level === entry.level)) {
      this.waiting.splice(this.waiting.indexOf(waiter), 1);
      waiter.resolve(entry);
    }
  }
}

/** Collects the policies handed to onSwap; next() resolves with the following one. */
class SwapRecorder {
  readonly swapped: GatewayPolicy[] = [];
  private waiting: ((policy: GatewayPolicy) => void)[] = [];

  readonly onSwap = (policy: GatewayPolicy): void => {
    this.swapped.push(policy);
    const waiting = this.waiting;
    this.waiting = [];
    for (const resolve of waiting) resolve(policy);
  };

  next(): Promise<GatewayPolicy> {
    return new Promise((resolve) => this.waiting.push(resolve));
  }
}

/** Fails instead of hanging when an awaited event never comes. */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

const readerRequest: PolicyRequest = { service: 'demo', roles: ['reader'], scope: 'project', projectId: 'p-1', userId: 'u-1', method: 'GET', path: '/things' };

const v1Rules = ruleFile('p, reader, *, /things, GET, allow');
const v2Rules = ruleFile('p, reader, *, /things, GET, allow', 'p, reader, *, /things, HEAD, allow');

function fixture(name: string, method: string, expect: 'allow' | 'deny'): string {
  return [`- name: ${name}`, '  service: demo', '  roles: [reader]', '  scope: project', `  method: ${method}`, '  path: /things', `  expect: ${expect}`, ''].join('\n');
}

const v1Fixtures = fixture('reader lists things', 'GET', 'allow') + fixture('no HEAD yet', 'HEAD', 'deny');
const v2Fixtures = fixture('reader lists things', 'GET', 'allow') + fixture('HEAD too', 'HEAD', 'allow');

function goodDirectory(t: { teardown(fn: () => void): void }): string {
  return policyDirectory(t, { 'demo.csv': v1Rules, 'tests/demo.yaml': v1Fixtures });
}

const allowsHead = (policy: GatewayPolicy | undefined) => policy?.decide({ ...readerRequest, method: 'HEAD' }).allowed;

t.test('loadInitial', async (t) => {
  t.test('loads a good set and runs its fixtures', async (t) => {
    const log = new RecordingLog();
    const swaps = new SwapRecorder();
    const reloader = new PolicyReloader({ directory: goodDirectory(t), onSwap: swaps.onSwap, log });
    const policy = await reloader.loadInitial();
    t.equal(reloader.current, policy);
    t.equal(policy.decide(readerRequest).allowed, true);
    t.equal(allowsHead(policy), false);
    t.same(swaps.swapped, [], 'loadInitial hands the policy back instead of swapping');
    t.match(log.entries, [{ level: 'info', message: 'gateway policy loaded', fields: { services: ['demo'] } }]);
  });

  t.test('fails on a broken rule file', async (t) => {
    const directory = policyDirectory(t, { 'demo.csv': ruleFile('p, reader, *, /things, GET'), 'tests/demo.yaml': v1Fixtures });
    const reloader = new PolicyReloader({ directory, onSwap: () => {}, log: new RecordingLog() });
    await t.rejects(reloader.loadInitial(), { name: 'PolicyLoadError', line: 2, message: /demo\.csv:2: expected 5 fields/ });
    t.equal(reloader.current, undefined);
  });

  t.test('fails on a broken model.conf', async (t) => {
    const directory = policyDirectory(t, { 'model.conf': shippedModel.replace('[matchers]', '[matcher]'), 'demo.csv': v1Rules });
    const reloader = new PolicyReloader({ directory, onSwap: () => {}, log: new RecordingLog() });
    await t.rejects(reloader.loadInitial(), PolicyLoadError);
  });

  t.test('fails when a fixture fails, listing the failures', async (t) => {
    const directory = policyDirectory(t, { 'demo.csv': v1Rules, 'tests/demo.yaml': v2Fixtures });
    const reloader = new PolicyReloader({ directory, onSwap: () => {}, log: new RecordingLog() });
    const error = await reloader.loadInitial().then(
      () => undefined,
      (error: unknown) => error,
    );
    t.type(error, PolicyLoadError);
    if (!(error instanceof PolicyLoadError)) return;
    t.equal(error.failures.length, 1);
    t.match(error.failures[0], /case 2 "HEAD too": expected allow, got deny/);
    t.match(error.message, /1 policy fixture\(s\) failed \(1 passed\)/);
  });
});

t.test('reload', async (t) => {
  t.test('swaps on a good change', async (t) => {
    const directory = goodDirectory(t);
    const log = new RecordingLog();
    const swaps = new SwapRecorder();
    const reloader = new PolicyReloader({ directory, onSwap: swaps.onSwap, log });
    const initial = await reloader.loadInitial();

    writePolicyFiles(directory, { 'demo.csv': v2Rules, 'tests/demo.yaml': v2Fixtures });
    t.equal(await reloader.reload(), true);
    t.equal(swaps.swapped.length, 1);
    const next = swaps.swapped[0];
    t.not(next, initial, 'a new policy instance');
    t.equal(reloader.current, next);
    t.equal(allowsHead(next), true, 'the new rule is in force');
    t.equal(allowsHead(initial), false, 'the old instance is unchanged');
    t.same(log.errors(), []);
    t.match(log.entries.at(-1), { level: 'info', message: 'gateway policy reloaded' });
  });

  t.test('keeps the old policy when a rule file breaks', async (t) => {
    const directory = goodDirectory(t);
    const log = new RecordingLog();
    const swaps = new SwapRecorder();
    const reloader = new PolicyReloader({ directory, onSwap: swaps.onSwap, log });
    const initial = await reloader.loadInitial();

    writePolicyFiles(directory, { 'demo.csv': ruleFile('p, reader, *, /things, GET, allow', 'p, reader, tenant, /things, HEAD, allow') });
    t.equal(await reloader.reload(), false);
    t.same(swaps.swapped, []);
    t.equal(reloader.current, initial);
    t.equal(log.errors().length, 1);
    t.match(log.errors()[0], {
      message: 'gateway policy reload rejected; keeping the last good policy',
      fields: { directory, err: /demo\.csv:3: unknown scope 'tenant'/, failures: [] },
    });
  });

  t.test('keeps the old policy when a rule file is emptied (an editor truncating before it writes)', async (t) => {
    const otherRequest: PolicyRequest = { ...readerRequest, service: 'other' };
    const directory = policyDirectory(t, { 'demo.csv': v1Rules, 'other.csv': v1Rules, 'tests/demo.yaml': v1Fixtures });
    const log = new RecordingLog();
    const swaps = new SwapRecorder();
    const reloader = new PolicyReloader({ directory, onSwap: swaps.onSwap, log });
    const initial = await reloader.loadInitial();
    t.equal(initial.decide(otherRequest).allowed, true);

    for (const [what, content] of [['empty', ''], ['whitespace only', ' \n\n']] as const) {
      writePolicyFiles(directory, { 'other.csv': content });
      t.equal(await reloader.reload(), false, `${what}: rejected`);
      t.same(swaps.swapped, []);
      t.equal(reloader.current, initial, `${what}: the last good set stays`);
      t.match(log.errors().at(-1), {
        message: 'gateway policy reload rejected; keeping the last good policy',
        fields: { directory, err: /other\.csv: the rule file is empty/ },
      });
    }
    t.equal(reloader.current?.decide(otherRequest).allowed, true, 'the service is not deny-all meanwhile');

    // A file that says it allows nothing is a deliberate deny-all.
    writePolicyFiles(directory, { 'other.csv': ruleFile() });
    t.equal(await reloader.reload(), true);
    t.equal(reloader.current?.decide(otherRequest).allowed, false);
    await t.rejects(new PolicyReloader({ directory: policyDirectory(t, { 'demo.csv': '' }), onSwap: () => {}, log: new RecordingLog() }).loadInitial(), {
      name: 'PolicyLoadError',
      message: /demo\.csv: the rule file is empty/,
    }, 'at start-up too');
  });

  t.test('keeps the old policy when a fixture fails', async (t) => {
    const directory = goodDirectory(t);
    const log = new RecordingLog();
    const swaps = new SwapRecorder();
    const reloader = new PolicyReloader({ directory, onSwap: swaps.onSwap, log });
    const initial = await reloader.loadInitial();

    // The rules change, the fixtures still say HEAD is denied.
    writePolicyFiles(directory, { 'demo.csv': v2Rules });
    t.equal(await reloader.reload(), false);
    t.same(swaps.swapped, []);
    t.equal(reloader.current, initial);
    t.equal(allowsHead(reloader.current), false);
    const [rejected] = log.errors();
    t.match(rejected, { message: 'gateway policy reload rejected; keeping the last good policy', fields: { err: /1 policy fixture\(s\) failed/ } });
    const failures = rejected?.fields.failures as string[] | undefined;
    t.equal(failures?.length, 1);
    t.match(failures?.[0], /tests\/demo\.yaml: case 2 "no HEAD yet": expected deny, got allow/);

    // Fixing the fixture makes the same rules acceptable.
    writePolicyFiles(directory, { 'tests/demo.yaml': v2Fixtures });
    t.equal(await reloader.reload(), true);
    t.equal(allowsHead(reloader.current), true);
  });

  t.test('a throwing onSwap keeps the last good policy', async (t) => {
    const directory = goodDirectory(t);
    const log = new RecordingLog();
    const reloader = new PolicyReloader({
      directory,
      onSwap: () => {
        throw new Error('holder refused');
      },
      log,
    });
    const initial = await reloader.loadInitial();
    writePolicyFiles(directory, { 'demo.csv': v2Rules, 'tests/demo.yaml': v2Fixtures });
    t.equal(await reloader.reload(), false);
    t.equal(reloader.current, initial);
    t.match(log.errors(), [{ message: 'gateway policy swap failed', fields: { err: 'holder refused' } }]);
  });

  t.test('concurrent reloads run one at a time, in order', async (t) => {
    const directory = goodDirectory(t);
    const swaps = new SwapRecorder();
    const reloader = new PolicyReloader({ directory, onSwap: swaps.onSwap, log: new RecordingLog() });
    await reloader.loadInitial();

    // Gate GatewayPolicy.load so the test decides when each load may proceed, and record overlap.
    const original = GatewayPolicy.load;
    t.teardown(() => {
      GatewayPolicy.load = original;
    });
    const events: string[] = [];
    const starts: { promise: Promise<() => void>; resolve: (release: () => void) => void }[] = [];
    const startOf = (n: number) => {
      if (!starts[n]) {
        let resolve!: (release: () => void) => void;
        const promise = new Promise<() => void>((done) => (resolve = done));
        starts[n] = { promise, resolve };
      }
      return starts[n];
    };
    let loads = 0;
    let inFlight = 0;
    let mostInFlight = 0;
    GatewayPolicy.load = async (loadDirectory, options) => {
      const n = loads++;
      inFlight++;
      mostInFlight = Math.max(mostInFlight, inFlight);
      events.push(`start ${n}`);
      try {
        await new Promise<void>((release) => startOf(n).resolve(release));
        return await original.call(GatewayPolicy, loadDirectory, options);
      } finally {
        inFlight--;
        events.push(`end ${n}`);
      }
    };

    const first = reloader.reload();
    t.equal(reloader.reload(), first, 'a request made before the reload starts shares it');
    const releaseFirst = await within(startOf(0).promise, 5_000, 'the first load');

    // The files change while the first load is running: a second reload must follow it.
    writePolicyFiles(directory, { 'demo.csv': v2Rules, 'tests/demo.yaml': v2Fixtures });
    const second = reloader.reload();
    t.not(second, first, 'a reload requested during a running one is a new one');
    t.equal(reloader.reload(), second, 'requests while it waits share it');
    t.equal(loads, 1, 'the second load has not started');

    releaseFirst();
    t.equal(await first, true);
    const releaseSecond = await within(startOf(1).promise, 5_000, 'the second load');
    releaseSecond();
    t.equal(await second, true);

    t.same(events, ['start 0', 'end 0', 'start 1', 'end 1'], 'loads never overlap');
    t.equal(mostInFlight, 1);
    t.equal(swaps.swapped.length, 2);
    t.equal(reloader.current, swaps.swapped[1], 'the later reload is the one in force');
    t.equal(allowsHead(reloader.current), true, 'and it saw the later files');
  });
});

t.test('the file watcher', async (t) => {
  t.test('reloads after a change, and keeps the policy when the change is broken', async (t) => {
    const directory = goodDirectory(t);
    const log = new RecordingLog();
    const swaps = new SwapRecorder();
    const reloader = new PolicyReloader({ directory, onSwap: swaps.onSwap, log, debounceMs: 20 });
    const initial = await reloader.loadInitial();
    reloader.start();
    t.teardown(() => reloader.stop());

    const swapped = swaps.next();
    writePolicyFiles(directory, { 'tests/demo.yaml': v2Fixtures, 'demo.csv': v2Rules });
    const next = await within(swapped, 10_000, 'a swap after the change');
    t.not(next, initial);
    t.equal(allowsHead(next), true);
    t.equal(reloader.current, next);

    const rejected = log.next('error');
    writePolicyFiles(directory, { 'demo.csv': ruleFile('p, reader, *, /things, get, allow') });
    const entry = await within(rejected, 10_000, 'the rejected reload');
    t.match(entry, { message: 'gateway policy reload rejected; keeping the last good policy', fields: { err: /demo\.csv:2: unknown method 'get'/ } });
    t.equal(reloader.current, next, 'the last good policy stays');
  });

  t.test('follows a Kubernetes ConfigMap symlink swap', async (t) => {
    const directory = policyDirectory(t, {
      '..v1/model.conf': shippedModel,
      '..v1/demo.csv': v1Rules,
      '..v1/tests/demo.yaml': v1Fixtures,
    });
    fs.rmSync(path.join(directory, 'model.conf'));
    fs.symlinkSync('..v1', path.join(directory, '..data'));
    for (const name of ['model.conf', 'demo.csv', 'tests']) fs.symlinkSync(path.join('..data', name), path.join(directory, name));

    const log = new RecordingLog();
    const swaps = new SwapRecorder();
    const reloader = new PolicyReloader({ directory, onSwap: swaps.onSwap, log, debounceMs: 20 });
    const initial = await reloader.loadInitial();
    t.equal(allowsHead(initial), false);
    reloader.start();
    t.teardown(() => reloader.stop());

    // What the kubelet does: write a new timestamped directory, then atomically repoint ..data.
    writePolicyFiles(path.join(directory, '..v2'), { 'model.conf': shippedModel, 'demo.csv': v2Rules, 'tests/demo.yaml': v2Fixtures });
    const swapped = swaps.next();
    fs.symlinkSync('..v2', path.join(directory, '..data_tmp'));
    fs.renameSync(path.join(directory, '..data_tmp'), path.join(directory, '..data'));
    const next = await within(swapped, 10_000, 'a swap after the ConfigMap update');
    t.equal(allowsHead(next), true);
    t.same(log.errors(), []);
  });
});
