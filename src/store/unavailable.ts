import { ServiceError, UnavailableError } from '../support/errors.ts';

// Socket errors of the driver when PostgreSQL cannot be reached or the connection breaks.
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

// SQLSTATEs of a server that is going away or refusing sessions: class 08 (connection exception),
// admin/crash shutdown, "the database system is starting up".
const UNAVAILABLE_SQL_STATES = new Set(['57P01', '57P02', '57P03']);

// SQLSTATEs of a server that answers but is busy: too many connections, a lock not granted within
// lock_timeout. A 503 too, but the database is reachable: queries keep being sent.
const BUSY_SQL_STATES = new Set(['53300', '55P03']);

// What pg throws without a code when a connection ends or times out (ours: a silent connection
// dropped by the store). knex prefixes the failed statement, with its values, and ' - ': only the
// end of a message is compared, and only that part is ever logged.
const UNAVAILABLE_MESSAGES = [
  'Connection terminated unexpectedly',
  'Connection terminated',
  'Connection terminated due to connection timeout',
  'Connection ended unexpectedly',
  'timeout expired',
  'Client has encountered a connection error and is not queryable',
  'Client was closed and is not queryable',
  'Knex: Timeout acquiring a connection. The pool is probably full. Are you missing a .transacting(trx) call?',
  // knex sends BEGIN after handing out the transaction: when the connection fails then, the
  // statements of the transaction meet this (no statement here runs after its commit).
  'Transaction query already complete, run with DEBUG=knex:tx for more info',
];
const READ_TIMEOUT = /(?:^| - )(database read timeout: [^\n]*)$/;

export const DATABASE_UNAVAILABLE_MESSAGE = 'The service is temporarily unavailable: its database cannot be reached. Retry later.';

/** Retry-After of a database 503: the database is probed at least this often. */
export const DATABASE_RETRY_AFTER_SECONDS = 1;

/** The code of DatabaseUnreachableError (kept by the ORM's wrappers, which copy own properties). */
export const DATABASE_UNREACHABLE_CODE = 'EDBUNREACHABLE';

/** The error a query meets at once while the database is known to be unreachable (no wait). */
export class DatabaseUnreachableError extends Error {
  readonly code = DATABASE_UNREACHABLE_CODE;
  constructor() {
    super('database unreachable: not asked until a probe succeeds');
  }
}

/**
 * Why the database cannot be reached, when `error` (or what caused it) says so: a short reason
 * that holds no SQL and no values, fit for a log line; undefined for any other error.
 */
export function databaseUnreachableReason(error: unknown): string | undefined {
  for (let current = error, depth = 0; current && typeof current === 'object' && depth < 5; current = (current as { cause?: unknown }).cause, depth++) {
    const { code, name, message } = current as { code?: unknown; name?: unknown; message?: unknown };
    if (typeof code === 'string' && code !== '') {
      // A code decides: a SQLSTATE the server sent about the statement is not an outage.
      if (code === DATABASE_UNREACHABLE_CODE) return 'database unreachable (waiting for the probe)';
      if (NETWORK_CODES.has(code) || code.startsWith('08') || UNAVAILABLE_SQL_STATES.has(code) || BUSY_SQL_STATES.has(code)) return code;
      continue;
    }
    if (name === 'KnexTimeoutError') return 'no free database connection in time';
    if (typeof message !== 'string') continue;
    const known = UNAVAILABLE_MESSAGES.find((text) => message === text || message.endsWith(` - ${text}`));
    if (known) return known;
    const timeout = READ_TIMEOUT.exec(message);
    if (timeout) return timeout[1];
  }
  return undefined;
}

/** Whether `error` is the instant refusal of a query while the database is known unreachable (logged once, not per request). */
export function isDatabaseKnownUnreachable(error: unknown): boolean {
  for (let current = error, depth = 0; current && typeof current === 'object' && depth < 5; current = (current as { cause?: unknown }).cause, depth++) {
    if ((current as { code?: unknown }).code === DATABASE_UNREACHABLE_CODE) return true;
  }
  return false;
}

/** Whether the server answered `error` and is only busy (too many connections, a lock wait): no partition. */
export function isDatabaseBusy(error: unknown): boolean {
  for (let current = error, depth = 0; current && typeof current === 'object' && depth < 5; current = (current as { cause?: unknown }).cause, depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && code !== '') return BUSY_SQL_STATES.has(code);
  }
  return false;
}

export function isDatabaseUnreachable(error: unknown): boolean {
  return databaseUnreachableReason(error) !== undefined;
}

/** The typed 503 for a database failure, or undefined when `error` is something else. */
export function databaseUnavailable(error: unknown): UnavailableError | undefined {
  if (error instanceof UnavailableError) return error;
  return isDatabaseUnreachable(error) ? new UnavailableError(DATABASE_UNAVAILABLE_MESSAGE, DATABASE_RETRY_AFTER_SECONDS) : undefined;
}

/**
 * The domain error `error` is, if any: a ServiceError as thrown, or the 503 UnavailableError for a
 * failure of the database connection (driver errors are not typed by the services that meet them).
 */
export function serviceErrorOf(error: unknown): ServiceError | undefined {
  if (error instanceof ServiceError) return error;
  return databaseUnavailable(error);
}
