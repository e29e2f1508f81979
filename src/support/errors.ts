// Domain errors: the core services throw these and know nothing of HTTP; http/errors.ts maps each
// kind to a status code and Keystone's {"error": {...}} body exactly once.

export type ErrorKind =
  | 'validation'
  | 'unauthorized'
  | 'forbidden'
  | 'not_found'
  | 'conflict'
  | 'unavailable'
  | 'not_implemented'
  | 'too_many_requests';

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
  static expecting(attribute: string, target: string): ValidationError {
    return new ValidationError(`Expecting to find ${attribute} in ${target}. ${CLIENT_IN_ERROR}`);
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
}

/** 403: authenticated, but not allowed (policy) or the operation is refused by a rule. */
export class ForbiddenError extends ServiceError {
  readonly kind = 'forbidden';
  static action(action?: string): ForbiddenError {
    return new ForbiddenError(
      action
        ? `You are not authorized to perform the requested action: ${action}.`
        : 'You are not authorized to perform the requested action.',
    );
  }
}

/** 404 with Keystone's "Could not find {kind}: {id}." text, or a custom message. */
export class NotFoundError extends ServiceError {
  readonly kind = 'not_found';
  static of(kind: string, id: string): NotFoundError {
    return new NotFoundError(`Could not find ${kind}: ${id}.`);
  }
}

/** 409: a uniqueness rule was broken. */
export class ConflictError extends ServiceError {
  readonly kind = 'conflict';
  constructor(type: string, details: string) {
    super(`Conflict occurred attempting to store ${type} - ${details}.`);
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
