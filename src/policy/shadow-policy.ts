import type { CacheStats } from '../support/cache.ts';
import type { GatewayPolicy } from './gateway-policy.ts';
import { PolicyReloader, type PolicyReloaderLog } from './policy-reloader.ts';

/**
 * The shadow gateway policy (POLICY_SHADOW_DIR): loaded, fixture-gated and hot-reloaded exactly as
 * the live one (the same reloader), decided beside it for every proxied request and never
 * enforced. Its own GatewayPolicy instances carry their own decision caches, counted apart.
 */
export class ShadowPolicy {
  /** Hits and misses of the shadow policies' decision caches (one object across reloads). */
  readonly decisionCacheStats: CacheStats = { hits: 0, misses: 0 };
  readonly reloader: PolicyReloader;
  private policy: GatewayPolicy | undefined;

  private constructor(directory: string, log: PolicyReloaderLog) {
    this.reloader = new PolicyReloader({
      directory,
      name: 'gateway shadow policy',
      onSwap: (next) => {
        this.policy = next;
      },
      log,
      policyOptions: { decisionCacheStats: this.decisionCacheStats },
    });
  }

  /** Loads `directory` (throws PolicyLoadError if it fails to load or its fixtures fail) and watches it. */
  static async start(directory: string, log: PolicyReloaderLog): Promise<ShadowPolicy> {
    const shadow = new ShadowPolicy(directory, log);
    shadow.policy = await shadow.reloader.loadInitial();
    shadow.reloader.start();
    return shadow;
  }

  /** The shadow policy in force (what the gateway's policy holder's `shadow` returns). */
  readonly current = (): GatewayPolicy => this.policy!;

  stop(): void {
    this.reloader.stop();
  }
}
