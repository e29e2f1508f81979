import type { AuditInitiator, AuditTrail } from '../events/audit.ts';
import { AuthenticationError, ServiceError, statusOf, ValidationError } from '../support/errors.ts';

/**
 * identity.authenticate with outcome failure. Malformed requests (400) are not authentication
 * attempts; everything else is, with the real cause for an auditor (the client saw a generic 401).
 */
export function auditAuthenticationFailure(trail: Pick<AuditTrail, 'authenticate'>, initiator: AuditInitiator, error: unknown, userName?: string): void {
  if (!(error instanceof ServiceError) || error instanceof ValidationError) return;
  const failure = error instanceof AuthenticationError ? error.failure : undefined;
  trail.authenticate(
    'failure',
    { ...initiator, ...(failure?.userId ? { userId: failure.userId } : {}), ...(userName ? { userName } : {}) },
    { reasonType: failure?.reason ?? error.message, reasonCode: String(failure?.code ?? statusOf(error)) },
  );
}
