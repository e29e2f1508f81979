import net from 'node:net';
import type { AuthRateLimit } from '../config.ts';
import { TooManyRequestsError } from '../errors.ts';
import type { RateDecision, RateLimiter } from '../rate-limiter.ts';
import type { AuthRequest, NameOrId } from './token-service.ts';

/** An attempt that passed the limits; say how it ended. */
export interface LoginAttempt {
  succeeded(): Promise<void>;
}

const NOTHING_TO_RELEASE: LoginAttempt = { succeeded: async () => {} };

/**
 * Brute-force resistance for POST /v3/auth/tokens, in front of any password check:
 * - per client address, every attempt counts (password spraying across many users);
 * - per user as the request names it (id, or domain + name, whether or not it exists, so a 429
 *   reveals nothing), attempts that do not succeed count: a success gives its unit back, and
 *   concurrent guesses are counted before they are checked.
 */
export class LoginThrottle {
  private readonly windowMs: number;

  constructor(
    private readonly limiter: RateLimiter,
    private readonly limits: AuthRateLimit,
  ) {
    this.windowMs = limits.windowSeconds * 1000;
  }

  /**
   * Before checking a secret: `principal` is principalOf(the token request), or userPrincipal(id)
   * for a self-service password change. Throws TooManyRequestsError when a limit is reached.
   */
  async begin(clientAddress: string, principal: string | undefined): Promise<LoginAttempt> {
    if (this.limits.perAddress > 0) {
      const decision = await this.limiter.consume(`address:${addressKey(clientAddress)}`, this.limits.perAddress, this.windowMs);
      if (!decision.allowed) throw new TooManyRequestsError(decision.retryAfterSeconds);
    }
    if (!principal || this.limits.perUser === 0) return NOTHING_TO_RELEASE;
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

function userKey(user: (NameOrId & { domain?: NameOrId | undefined }) | undefined): string | undefined {
  if (!user) return undefined;
  if (typeof user.id === 'string' && user.id) return userPrincipal(user.id);
  if (typeof user.name !== 'string' || !user.name) return undefined;
  const domain = user.domain;
  if (typeof domain?.id === 'string' && domain.id) return `domain-id:${domain.id}/${user.name}`;
  if (typeof domain?.name === 'string' && domain.name) return `domain-name:${domain.name}/${user.name}`;
  return undefined;
}

/** The user a password or application-credential attempt is for, as named by the client. */
export function principalOf(request: AuthRequest): string | undefined {
  if (request.methods.includes('password')) {
    const key = userKey(request.password?.user);
    if (key) return key;
  }
  if (request.methods.includes('application_credential')) {
    const credential = request.application_credential;
    const key = userKey(credential?.user);
    if (key) return key;
    if (typeof credential?.id === 'string' && credential.id) return `application-credential:${credential.id}`;
  }
  return undefined;
}
