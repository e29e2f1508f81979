import type { User } from '../identity/identity-service.ts';
import type { ResourceService } from '../resource/resource-service.ts';
import type { Clock } from '../support/clock.ts';
import { AuthenticationError, AuthReceiptRequiredError } from '../support/errors.ts';
import type { ReceiptPayload } from '../token/fernet-payload.ts';

/** Seals and opens receipts (the Fernet token provider's keys: Keystone's [fernet_receipts] default). */
export interface ReceiptKeys {
  issueReceipt(receipt: ReceiptPayload, issuedAtSeconds: number): string;
  /** Null for anything that is not a receipt made with these keys. */
  decodeReceipt(receipt: string): { payload: ReceiptPayload; issuedAt: number } | null;
}

/**
 * Multi-factor rules and auth receipts (Keystone's UserMFARulesValidator and receipt provider).
 * A user with `multi_factor_auth_rules` (and `multi_factor_auth_enabled` not false) gets a token
 * only when the methods used, with those of a receipt from an earlier partial authentication,
 * include every method of one rule; otherwise a receipt naming the methods used so far.
 */
export class ReceiptService {
  private readonly loaded: ReadonlySet<string>;
  private readonly order: readonly string[];

  constructor(
    private readonly keys: ReceiptKeys,
    private readonly resources: Pick<ResourceService, 'findAny'>,
    private readonly clock: Clock,
    /** Keystone's [receipt] expiration (seconds). */
    private readonly expirationSeconds: number,
    /** Keystone's [auth] methods: rule entries naming other methods are ignored, as there. */
    loadedMethods: readonly string[],
  ) {
    this.loaded = new Set(loadedMethods);
    this.order = loadedMethods;
  }

  /**
   * The methods a token for `user` is issued with: `methods` and those of `receipt` (checked first,
   * whether or not the user has rules, as Keystone does). Throws AuthReceiptRequiredError with a
   * new receipt when they satisfy none of the user's rules.
   */
  async enforce(user: User, methods: readonly string[], receipt: string | undefined): Promise<string[]> {
    const used = new Set(methods);
    if (receipt) for (const method of this.methodsOf(receipt, user.id)) used.add(method);
    // Listed lowest bit first, as the live Keystone showed them (["password", "token"]).
    const all = [...used].sort((a, b) => this.order.indexOf(a) - this.order.indexOf(b));
    const rules = this.rulesOf(user);
    if (rules.length === 0 || rules.some((rule) => rule.every((method) => used.has(method)))) return all;
    throw new AuthReceiptRequiredError(await this.issue(user, all, rules));
  }

  /** The methods of a valid receipt of this user; a receipt that is not ours, expired or another user's: 401. */
  methodsOf(receipt: string, userId: string): string[] {
    const opened = this.keys.decodeReceipt(receipt);
    if (!opened || this.clock.now() >= opened.payload.expiresAt * 1000 || opened.payload.userId !== userId) {
      throw AuthReceiptRequiredError.receiptNotFound(receipt, userId);
    }
    return opened.payload.methods;
  }

  /**
   * The user's rules as Keystone's validator reads them, with methods that are not loaded dropped;
   * none when disabled or absent. A rule left empty is satisfied by anything.
   */
  rulesOf(user: User): string[][] {
    const options = (user.options ?? {}) as Record<string, unknown>;
    if (options.multi_factor_auth_enabled === false) return [];
    const rules = options.multi_factor_auth_rules;
    if (!Array.isArray(rules)) return [];
    const parsed: string[][] = [];
    for (const rule of rules) {
      if (!Array.isArray(rule) || rule.length === 0 || !rule.every((method) => typeof method === 'string')) continue;
      parsed.push([...new Set(rule as string[])].filter((method) => this.loaded.has(method)));
    }
    return parsed;
  }

  private async issue(user: User, methods: string[], rules: string[][]) {
    const issuedAt = Math.floor(this.clock.now() / 1000) * 1000;
    const expiresAt = issuedAt + this.expirationSeconds * 1000;
    const id = this.keys.issueReceipt({ userId: user.id, methods, expiresAt: expiresAt / 1000 }, issuedAt / 1000);
    const domain = await this.resources.findAny(user.domainId);
    if (!domain) throw new AuthenticationError();
    return {
      id,
      methods,
      user: { id: user.id, name: user.name, domainId: user.domainId, domainName: domain.name },
      issuedAt,
      expiresAt,
      // Keystone lists the rules that share a method with those used.
      requiredMethods: rules.filter((rule) => rule.some((method) => methods.includes(method))),
    };
  }
}
