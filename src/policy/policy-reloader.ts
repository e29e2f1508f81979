import { existsSync, watch, type FSWatcher } from 'node:fs';
import path from 'node:path';
import { GatewayPolicy } from './gateway-policy.ts';
import type { GatewayPolicyOptions } from './gateway-policy-types.ts';
import { PolicyLoadError, type PolicyFixtureResult } from './policy-files.ts';

/** What the reloader needs of a policy: its fixtures, and a summary for the log. */
export interface ReloadablePolicy {
  runFixtures(testsDirectory: string): Promise<PolicyFixtureResult>;
  summary(): Record<string, unknown>;
}

export interface PolicyReloaderLog {
  info(o: object, m: string): void;
  error(o: object, m: string): void;
}

export interface PolicyReloaderOptions<P extends ReloadablePolicy = GatewayPolicy> {
  directory: string;
  /** Receives each new policy that loaded and passed its fixtures; assign it in one statement. */
  onSwap(policy: P): void;
  log: PolicyReloaderLog;
  /** Quiet period after the last file event before reloading (ms). */
  debounceMs?: number;
  /** Loads the directory; the gateway policy (with `policyOptions`) unless given. */
  load?: (directory: string) => Promise<P>;
  /** Names the policy in log lines. */
  name?: string;
  policyOptions?: GatewayPolicyOptions;
}

// Names whose change can alter the policy; '..data' is the symlink a Kubernetes ConfigMap swaps.
const RELEVANT = /(\.csv|\.conf|\.ya?ml)$|^tests$|^\.\.data$/;

/**
 * Loads the gateway policy and replaces it when its files change, but only with a set that loads
 * and passes its own fixtures; otherwise the last good policy stays in force.
 */
export class PolicyReloader<P extends ReloadablePolicy = GatewayPolicy> {
  private readonly directory: string;
  private readonly testsDirectory: string;
  private readonly debounceMs: number;
  private directoryWatcher: FSWatcher | undefined;
  private testsWatcher: FSWatcher | undefined;
  private timer: NodeJS.Timeout | undefined;
  private watching = false;
  /** The reload waiting to start (later requests join it) and the tail of the serial chain. */
  private queued: Promise<boolean> | undefined;
  private tail: Promise<unknown> = Promise.resolve();
  private last: P | undefined;
  private readonly load: (directory: string) => Promise<P>;
  private readonly name: string;
  /** Reloads that swapped the policy, and those rejected (the last good one kept); for metrics. */
  readonly reloadCounts = { success: 0, failure: 0 };

  constructor(private readonly options: PolicyReloaderOptions<P>) {
    this.directory = options.directory;
    this.testsDirectory = path.join(options.directory, 'tests');
    this.debounceMs = options.debounceMs ?? 100;
    this.name = options.name ?? 'gateway policy';
    // Without a loader, P is the default GatewayPolicy.
    this.load = options.load ?? ((directory) => GatewayPolicy.load(directory, options.policyOptions) as unknown as Promise<P>);
  }

  /** The last policy this reloader loaded successfully, if any. */
  get current(): P | undefined {
    return this.last;
  }

  /** Loads the policy and runs its fixtures; throws PolicyLoadError if either fails (the caller installs the result). */
  async loadInitial(): Promise<P> {
    const policy = await this.loadChecked();
    this.last = policy;
    this.options.log.info({ directory: this.directory, ...policy.summary() }, `${this.name} loaded`);
    return policy;
  }

  /** Watches the directory and its tests/ subdirectory; changes reload after a short quiet period. */
  start(): void {
    if (this.watching) return;
    this.watching = true;
    this.directoryWatcher = this.watchDirectory(this.directory);
    this.rearmTestsWatcher();
  }

  stop(): void {
    this.watching = false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.directoryWatcher?.close();
    this.testsWatcher?.close();
    this.directoryWatcher = undefined;
    this.testsWatcher = undefined;
  }

  /**
   * Loads the current files and runs their fixtures; swaps only if both succeed. Resolves true on a
   * swap, false when the last good policy was kept. Reloads run one at a time, in order; requests
   * made while one waits to start share it.
   */
  reload(): Promise<boolean> {
    if (this.queued) return this.queued;
    const run = this.tail.then(() => {
      this.queued = undefined;
      return this.reloadNow();
    });
    this.queued = run;
    this.tail = run;
    return run;
  }

  private async reloadNow(): Promise<boolean> {
    let policy: P;
    try {
      policy = await this.loadChecked();
    } catch (error) {
      const failures = error instanceof PolicyLoadError ? error.failures : [];
      this.options.log.error(
        { directory: this.directory, err: error instanceof Error ? error.message : String(error), failures },
        `${this.name} reload rejected; keeping the last good policy`,
      );
      this.reloadCounts.failure++;
      return false;
    }
    try {
      this.options.onSwap(policy);
    } catch (error) {
      this.options.log.error({ directory: this.directory, err: error instanceof Error ? error.message : String(error) }, `${this.name} swap failed`);
      this.reloadCounts.failure++;
      return false;
    }
    this.reloadCounts.success++;
    this.last = policy;
    this.options.log.info({ directory: this.directory, ...policy.summary() }, `${this.name} reloaded`);
    return true;
  }

  private async loadChecked(): Promise<P> {
    const policy = await this.load(this.directory);
    const { passed, failures } = await policy.runFixtures(this.testsDirectory);
    if (failures.length > 0) {
      throw new PolicyLoadError(
        `${failures.length} policy fixture(s) failed (${passed} passed):\n${failures.join('\n')}`,
        this.testsDirectory,
        undefined,
        failures,
      );
    }
    return policy;
  }

  private watchDirectory(directory: string): FSWatcher | undefined {
    try {
      const watcher = watch(directory, { persistent: false }, (_event, filename) => this.changed(filename));
      watcher.on('error', (error) => {
        this.options.log.error({ directory, err: error.message }, `${this.name} watch failed`);
      });
      watcher.unref();
      return watcher;
    } catch (error) {
      this.options.log.error({ directory, err: error instanceof Error ? error.message : String(error) }, `cannot watch the ${this.name} directory`);
      return undefined;
    }
  }

  // tests/ may appear, vanish or be replaced (a ConfigMap swap), so it is re-watched on every change.
  private rearmTestsWatcher(): void {
    this.testsWatcher?.close();
    this.testsWatcher = existsSync(this.testsDirectory) ? this.watchDirectory(this.testsDirectory) : undefined;
  }

  private changed(filename: string | Buffer | null): void {
    if (!this.watching) return;
    const name = filename === null ? null : filename.toString();
    if (name !== null && !RELEVANT.test(name)) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (!this.watching) return;
      this.rearmTestsWatcher();
      void this.reload();
    }, this.debounceMs);
    this.timer.unref();
  }
}
