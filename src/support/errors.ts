// The error catalogue. Core services throw these kinds and know nothing of HTTP; this module alone
// maps each kind to its status and writes Keystone's {"error": {"code", "title", "message"}} body,
// for the identity API (http/errors.ts), the gateway and answers written straight to a socket.
// Messages that recur belong to their kind (NotFoundError.tokenNotValidated()), not to throw sites.

import { STATUS_CODES } from 'node:http';

export type ErrorKind =
  | 'validation'
  | 'unauthorized'
  | 'forbidden'
  | 'not_found'
  | 'conflict'
  | 'unavailable'
  | 'not_implemented'
  | 'too_many_requests';

const STATUS_OF: Record<ErrorKind, number> = {
  validation: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  unavailable: 503,
  not_implemented: 501,
  too_many_requests: 429,
};

/** The HTTP status of an error kind (or of a thrown error's kind). */
export function statusOf(error: ErrorKind | ServiceError): number {
  return STATUS_OF[typeof error === 'string' ? error : error.kind];
}

/** Keystone's error envelope for `status`, serialised: `{"error": {"code", "title", "message", ...extra}}`. */
export function errorEnvelope(status: number, message: string, extra: Record<string, unknown> = {}): string {
  return JSON.stringify(errorBody(status, message, extra));
}

/** Keystone's error envelope as an object (for a framework that serialises it). */
export function errorBody(status: number, message: string, extra: Record<string, unknown> = {}): { error: Record<string, unknown> } {
  return { error: { code: status, title: STATUS_CODES[status] ?? 'Error', message, ...extra } };
}

const CLIENT_IN_ERROR =
  'The server could not comply with the request since it is either malformed or otherwise incorrect. ' +
  'The client is assumed to be in error.';

export abstract class ServiceError extends Error {
  abstract readonly kind: ErrorKind;
  constructor(message?: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** 400: the request is malformed or breaks a rule of the data. */
export class ValidationError extends ServiceError {
  readonly kind = 'validation';
  /** oauthlib refused the OAuth parameters: Keystone's validate_oauth_params text. */
  static oauthParameters(error: string, description: string): ValidationError {
    return new ValidationError(`Validation failed with errors: ${error}, detail message is: ${description}.`);
  }
  static expecting(attribute: string, target: string): ValidationError {
    return new ValidationError(`Expecting to find ${attribute} in ${target}. ${CLIENT_IN_ERROR}`);
  }
  /** Keystone's text for a schema-like failure of one field: "Invalid input for field 'name': …". */
  static field(field: string, problem: string): ValidationError {
    return new ValidationError(`Invalid input for field '${field}': ${problem}`);
  }
  /** A time Keystone's parser refuses (application credential expires_at). */
  static timestampFormat(): ValidationError {
    return new ValidationError(`Timestamp not in expected format. ${CLIENT_IN_ERROR}`);
  }
  static expiresBeforeNow(): ValidationError {
    return new ValidationError(`The 'expires_at' must not be before now. ${CLIENT_IN_ERROR}`);
  }
  /** A name that is empty once trimmed (users, groups). */
  static blankName(): ValidationError {
    return ValidationError.field('name', 'the name must contain a non-space character.');
  }
  /** An update that names another id than the entity's own. */
  static idChange(): ValidationError {
    return new ValidationError('Cannot change ID');
  }
  /** An update that would move a user, group or project to another domain. */
  static domainChange(): ValidationError {
    return new ValidationError('Cannot change Domain ID');
  }
  /** One of the forms of an auth body that names a thing by id or by name + domain, with neither. */
  static idOrName(path: string): ValidationError {
    return new ValidationError(`Invalid input for field ${path}: id or name must be present.`);
  }
}

/** Why an authentication failed, for the audit trail only: never sent to the client. */
export interface AuthenticationFailure {
  /** Keystone's text for the cause, e.g. "The account is locked for user: ID." */
  reason: string;
  /** Keystone's status for the cause (404 for an unknown user), as a CADF reasonCode. */
  code: number;
  userId?: string;
}

/** 401: authentication failed; clients see the generic text unless a message is meant for them. */
export class AuthenticationError extends ServiceError {
  readonly kind = 'unauthorized';
  static readonly GENERIC = 'The request you have made requires authentication.';
  constructor(
    message: string = AuthenticationError.GENERIC,
    /** Keystone adds an "identity" member to auth-plugin failures. */
    readonly identity?: Record<string, unknown>,
    readonly failure?: AuthenticationFailure,
  ) {
    super(message);
  }

  /** The generic 401, remembering the real cause for the audit trail. */
  static because(failure: AuthenticationFailure): AuthenticationError {
    return new AuthenticationError(AuthenticationError.GENERIC, undefined, failure);
  }

  /**
   * A signed OAuth1 request refused. Keystone's Unauthorized hides its text from clients (they see
   * the generic one); the cause, in Keystone's words, is kept for the audit trail.
   */
  static oauth1(cause: keyof typeof OAUTH1_UNAUTHORIZED): AuthenticationError {
    return AuthenticationError.because({ reason: OAUTH1_UNAUTHORIZED[cause], code: 401 });
  }
}

/** Keystone's 401 texts of the OS-OAUTH1 flow and the oauth1 auth method, by cause (logged, not shown). */
const OAUTH1_UNAUTHORIZED = {
  'invalid signature': 'Invalid signature',
  'request token expired': 'Request token is expired',
  'access token expired': 'Access token is expired',
  'role not held': 'authorizing user does not have role required',
  'no consumer': 'Provided consumer does not exist.',
  'consumer mismatch': 'Provided consumer key does not match stored consumer key.',
  'verifier mismatch': 'Provided verifier does not match stored verifier',
  'not authorized': 'Request Token does not have an authorizing user id.',
  'access token not validated': 'Could not validate the access token',
  'user mismatch': 'User IDs do not match',
} as const;

/** Keystone's 404 texts of OS-OAUTH1's own lookups. */
const OAUTH1_NOT_FOUND = {
  consumer: 'Consumer not found',
  'request token': 'Request token not found',
  'access token': 'Access token not found',
  // Keystone 22 raises a bare NotFound for another user's access token: its template goes out unfilled.
  'another user': 'Could not find: %(target)s.',
} as const;

/** An issued MFA auth receipt, as its 401 shows it. */
export interface AuthReceipt {
  /** The receipt itself (the Openstack-Auth-Receipt header). */
  id: string;
  methods: string[];
  user: { id: string; name: string; domainId: string; domainName: string };
  /** Milliseconds since the epoch (whole seconds). */
  issuedAt: number;
  expiresAt: number;
  /** The user's rules (with methods this service does not know dropped) that share a method with those used. */
  requiredMethods: string[][];
}

/**
 * 401 of an MFA partial success (Keystone's InsufficientAuthMethods): the methods worked but satisfy
 * none of the user's multi_factor_auth_rules. Answered with the receipt in `Openstack-Auth-Receipt`
 * and Keystone's receipt body instead of the error envelope (and without WWW-Authenticate).
 */
export class AuthReceiptRequiredError extends ServiceError {
  readonly kind = 'unauthorized';
  constructor(readonly receipt: AuthReceipt) {
    super(`Insufficient auth methods received for ${receipt.user.id}. Auth Methods Provided: [${receipt.methods.join(', ')}].`);
  }

  /**
   * Keystone's ReceiptNotFound: a receipt that is not ours, expired, or another user's. The client
   * sees the header echoed; the audit trail does not (another user's receipt stands for a factor).
   */
  static receiptNotFound(receipt: string, userId?: string): AuthenticationError {
    return new AuthenticationError(`Could not find auth receipt: ${receipt}.`, undefined, { reason: 'Could not find auth receipt', code: 401, ...(userId ? { userId } : {}) });
  }
}

/** 403: authenticated, but not allowed (policy) or the operation is refused by a rule. */
export class ForbiddenError extends ServiceError {
  readonly kind = 'forbidden';
  static readonly NOT_AUTHORIZED = 'You are not authorized to perform the requested action.';
  static action(action?: string): ForbiddenError {
    return new ForbiddenError(action ? `You are not authorized to perform the requested action: ${action}.` : ForbiddenError.NOT_AUTHORIZED);
  }
  /** Keystone's InvalidDomainConfig: a domain configuration (or a request on one) it does not support. */
  static invalidDomainConfig(reason: string): ForbiddenError {
    return new ForbiddenError(`Invalid domain specific configuration: ${reason}.`);
  }
  /** A domain configured by an operator's file (DOMAIN_CONFIG_DIR): the API does not change it. */
  static domainConfiguredByFile(domainId: string, file: string): ForbiddenError {
    return ForbiddenError.invalidDomainConfig(`The configuration of domain ${domainId} is read from the file ${file} and cannot be changed through the API`);
  }
  /** A domain (or a project acting as one) is deleted only once disabled. */
  static enabledDomainDeletion(): ForbiddenError {
    return new ForbiddenError('Cannot delete a domain that is enabled, please disable it first.');
  }
}

/** 404 with Keystone's "Could not find {kind}: {id}." text, or a custom message. */
export class NotFoundError extends ServiceError {
  readonly kind = 'not_found';
  static of(kind: string, id: string): NotFoundError {
    return new NotFoundError(`Could not find ${kind}: ${id}.`);
  }
  /** Keystone's DomainConfigNotFound: `what` is "any options", "group ldap" or "option url in group ldap". */
  static domainConfig(domainId: string, what: string): NotFoundError {
    return new NotFoundError(`Could not find ${what} in domain configuration for domain ${domainId}.`);
  }
  /** A role that is not implied by the one named. */
  static implication(priorRoleId: string, impliedRoleId: string): NotFoundError {
    return new NotFoundError(`${priorRoleId} does not imply ${impliedRoleId}.`);
  }
  /** Keystone's answer for any token that does not validate, whatever the cause (never says which). */
  static tokenNotValidated(): NotFoundError {
    return new NotFoundError(TOKEN_NOT_VALIDATED);
  }
  /** An OS-OAUTH1 consumer, request token, access token or delegated role that is not there. */
  static oauth1(kind: keyof typeof OAUTH1_NOT_FOUND): NotFoundError {
    return new NotFoundError(OAUTH1_NOT_FOUND[kind]);
  }
  /** A role named in an authorization that does not exist (Keystone's RoleNotFound by name). */
  static oauth1Role(name: string): NotFoundError {
    return new NotFoundError(`Role ${name} is not defined`);
  }
}

const TOKEN_NOT_VALIDATED = 'Failed to validate token';

/** 409: a uniqueness rule was broken. */
export class ConflictError extends ServiceError {
  readonly kind = 'conflict';
  constructor(type: string, details: string) {
    super(`Conflict occurred attempting to store ${type} - ${details}.`);
  }
  /** A name taken, in Keystone's words ("at domain ID" only for what lives in a domain). */
  static duplicateName(type: string, name: string, domainId?: string): ConflictError {
    return new ConflictError(type, domainId === undefined ? `Duplicate entry found with name ${name}` : `Duplicate entry found with name ${name} at domain ID ${domainId}`);
  }
}

/** 503: a dependency (the database) is unreachable; the client may retry. */
export class UnavailableError extends ServiceError {
  readonly kind = 'unavailable';
  constructor(
    message?: string,
    /** Sent as Retry-After when set. */
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }

  /** A domain's identity directory (LDAP) did not answer within its timeouts; other domains are unaffected. */
  static directory(): UnavailableError {
    return new UnavailableError('The identity directory service of this domain is unavailable; retry later.', 5);
  }
}

/** 429: too many attempts; the client may retry after `retryAfterSeconds`. */
export class TooManyRequestsError extends ServiceError {
  readonly kind = 'too_many_requests';
  constructor(readonly retryAfterSeconds: number) {
    super('Too many authentication attempts. Retry after the number of seconds given in Retry-After.');
  }
}

export class NotImplementedError extends ServiceError {
  readonly kind = 'not_implemented';
  constructor() {
    super('The action you have requested has not been implemented.');
  }
}
