import { AuthenticationError, ServiceError, ValidationError } from '../support/errors.ts';
import type { TokenService } from '../token/token-service.ts';
import { Refusal } from './outcome.ts';
import { then, type Step } from './pipeline.ts';
import { header, type Caller, type ProxiedRequest } from './proxied-request.ts';

const NO_TOKEN = new Refusal(401, AuthenticationError.GENERIC, 'no token');
const INVALID_TOKEN = new Refusal(401, AuthenticationError.GENERIC, 'invalid token');
const UNSCOPED_TOKEN = new Refusal(401, AuthenticationError.GENERIC, 'unscoped token');

/**
 * Stage 2: X-Auth-Token (and X-Service-Token, if sent) validated in process; a missing, invalid or
 * unscoped token is 401. A user token alone in the validation cache is answered at once.
 */
export class Authenticator {
  constructor(
    private readonly tokens: TokenService,
    /** SERVICE_TOKEN_ROLES: a service token with one of them is privileged. */
    private readonly serviceTokenRoles: readonly string[],
  ) {}

  authenticate(proxied: ProxiedRequest): Step<Refusal | undefined> {
    const userToken = header(proxied.request, 'x-auth-token');
    if (!userToken) return NO_TOKEN;
    const serviceToken = header(proxied.request, 'x-service-token');
    const cached = serviceToken === undefined ? this.tokens.validateCached(userToken) : undefined;
    const caller = cached ? { user: cached, service: undefined, privilegedService: false } : this.validate(userToken, serviceToken);
    return then(caller, proxied, identified);
  }

  private async validate(userToken: string, serviceToken: string | undefined): Promise<Caller | Refusal> {
    try {
      // Without a service token validateWithServiceToken() is validate(): one async step fewer.
      if (serviceToken === undefined) return { user: await this.tokens.validate(userToken), service: undefined, privilegedService: false };
      const { user, service, privileged } = await this.tokens.validateWithServiceToken(userToken, serviceToken, this.serviceTokenRoles);
      return { user, service, privilegedService: privileged };
    } catch (error) {
      // A token that does not validate is 401; a database that cannot be asked is not the caller's fault.
      if (error instanceof ServiceError && !(error instanceof ValidationError) && error.kind !== 'unavailable') return INVALID_TOKEN;
      throw error;
    }
  }
}

/** The caller is recorded even when refused as unscoped: the audit line says whose token it was. */
function identified(proxied: ProxiedRequest, caller: Caller | Refusal): Refusal | undefined {
  if (caller instanceof Refusal) return caller;
  proxied.caller = caller;
  return caller.user.scope.type === 'unscoped' ? UNSCOPED_TOKEN : undefined;
}
