import net from 'node:net';
import type { AuthRateLimit } from '../config.ts';
import { TooManyRequestsError } from '../support/errors.ts';
import type { RateDecision, RateLimiter } from './rate-limiter.ts';
import type { UserReference } from '../identity/identity-service.ts';
import type { AuthRequest, NameOrId } from './token-request.ts';

/** An attempt that passed the limits; say how it ended. */
export interface LoginAttempt {
  succeeded(): Promise<void>;
}

const NOTHING_TO_RELEASE: LoginAttempt = { succeeded: async () => {} };

/**
 * Who a login names, for counting: the directory lookups the authentication itself makes (cached).
 * Both answer null for what does not exist (or is in a disabled domain).
 */
export interface LoginPrincipals {
  userIdOf(reference: UserReference): Promise<string | null>;
  domainIdOf(name: string): Promise<string | null>;
}

/**
 * Brute-force resistance for POST /v3/auth/tokens, in front of any password check:
 * - per client address, every attempt counts (password spraying across many users);
 * - per user, attempts that do not succeed count: a success gives its unit back, and concurrent
 *   guesses are counted before they are checked. A user that exists is counted by its id however
 *   the request names it (id, name in a domain named by id or by name), so no spelling has a budget
 *   of its own; a user that does not exist by (domain id, name), or (domain name, name) when the
 *   domain does not exist either: a 429 comes at the same point and reveals nothing.
 */
export class LoginThrottle {
  private readonly windowMs: number;

  constructor(
    private readonly limiter: RateLimiter,
    private readonly limits: AuthRateLimit,
    private readonly principals: LoginPrincipals,
  ) {
    this.windowMs = limits.windowSeconds * 1000;
  }

  /** Before checking the secrets of a token request. Throws TooManyRequestsError when a limit is reached. */
  beginLogin(clientAddress: string, request: AuthRequest): Promise<LoginAttempt> {
    return this.limit(clientAddress, () => this.principalOf(request));
  }

  /**
   * Before checking a secret of the user `principal` names (userPrincipal(id) for a self-service
   * password change). Throws TooManyRequestsError when a limit is reached.
   */
  begin(clientAddress: string, principal: string | undefined): Promise<LoginAttempt> {
    return this.limit(clientAddress, async () => principal);
  }

  /** The user a password, TOTP or application-credential attempt is for, as one key per user. */
  private async principalOf(request: AuthRequest): Promise<string | undefined> {
    if (request.methods.includes('password')) {
      const key = await this.userKey(request.password?.user);
      if (key) return key;
    }
    if (request.methods.includes('totp')) {
      const key = await this.userKey(request.totp?.user);
      if (key) return key;
    }
    if (request.methods.includes('application_credential')) {
      const credential = request.application_credential;
      const key = await this.userKey(credential?.user);
      if (key) return key;
      if (typeof credential?.id === 'string' && credential.id) return `application-credential:${credential.id}`;
    }
    return undefined;
  }

  private async userKey(user: (NameOrId & { domain?: NameOrId | undefined }) | undefined): Promise<string | undefined> {
    if (!user) return undefined;
    if (typeof user.id === 'string' && user.id) return userPrincipal(user.id);
    const name = user.name;
    if (typeof name !== 'string' || !name) return undefined;
    const domain = user.domain;
    let domainId: string | null;
    if (typeof domain?.id === 'string' && domain.id) {
      domainId = domain.id;
    } else if (typeof domain?.name === 'string' && domain.name) {
      domainId = await this.principals.domainIdOf(domain.name);
      if (!domainId) return `domain-name:${domain.name}/${name}`;
    } else {
      return undefined;
    }
    const userId = await this.principals.userIdOf({ name, domainId });
    return userId ? userPrincipal(userId) : `domain-id:${domainId}/${name}`;
  }

  // The address is counted first: a client over its limit costs no directory lookup.
  private async limit(clientAddress: string, principalOf: () => Promise<string | undefined>): Promise<LoginAttempt> {
    if (this.limits.perAddress > 0) {
      const decision = await this.limiter.consume(`address:${addressKey(clientAddress)}`, this.limits.perAddress, this.windowMs);
      if (!decision.allowed) throw new TooManyRequestsError(decision.retryAfterSeconds);
    }
    if (this.limits.perUser === 0) return NOTHING_TO_RELEASE;
    const principal = await principalOf();
    if (!principal) return NOTHING_TO_RELEASE;
    const key = `user:${principal}`;
    const decision: RateDecision = await this.limiter.consume(key, this.limits.perUser, this.windowMs);
    if (!decision.allowed) throw new TooManyRequestsError(decision.retryAfterSeconds);
    return { succeeded: () => this.limiter.refund(key, decision) };
  }
}

/** IPv6 clients are counted per /64 (one subscriber's usual allocation); IPv4-mapped as IPv4. */
export function addressKey(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1]!;
  if (net.isIPv6(address)) return `${ipv6Prefix64(address)}::/64`;
  return address;
}

function ipv6Prefix64(address: string): string {
  const [head = '', tail = ''] = address.split('::');
  const headGroups = head ? head.split(':') : [];
  const tailGroups = tail ? tail.split(':') : [];
  const groups = address.includes('::')
    ? [...headGroups, ...Array<string>(8 - headGroups.length - tailGroups.length).fill('0'), ...tailGroups]
    : headGroups;
  return groups
    .slice(0, 4)
    .map((group) => (parseInt(group, 16) || 0).toString(16))
    .join(':');
}

/** A user named by id: the same budget whether it is guessed through a token request or a password change. */
export function userPrincipal(userId: string): string {
  return `id:${userId}`;
}
