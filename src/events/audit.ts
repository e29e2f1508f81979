import { randomUUID } from 'node:crypto';
import os from 'node:os';
import type { Redis } from 'ioredis';
import type { Clock } from '../support/clock.ts';

// Audit events in the shape Keystone sends with notification_format=cadf: an oslo.messaging
// notification whose payload is a CADF event (pycadf's as_dict()). Events name users, projects,
// roles and token audit ids; never a password, secret or token (callers hand over ids only).

export const CADF_EVENT_TYPE_URI = 'http://schemas.dmtf.org/cloud/audit/1.0/event';
export const ACCOUNT_USER = 'service/security/account/user';
const SERVICE_SECURITY = 'service/security';

/** Keystone's CADF_TYPE_MAP, plus the types only this service audits. */
const TARGET_TYPES: Record<string, string> = {
  group: 'data/security/group',
  project: 'data/security/project',
  role: 'data/security/role',
  user: 'data/security/account/user',
  domain: 'data/security/domain',
  region: 'data/security/region',
  endpoint: 'data/security/endpoint',
  service: 'data/security/service',
  policy: 'data/security/policy',
  application_credential: 'data/security/credential',
  access_rule: 'data/security/credential',
  token: 'data/security/credential',
  'OS-TRUST:trust': 'data/security/trust',
  'OS-OAUTH1:consumer': 'data/security/account',
  'OS-OAUTH1:request_token': 'data/security/credential',
  'OS-OAUTH1:access_token': 'data/security/credential',
};

export type Outcome = 'success' | 'failure';

/** Who made the request: the caller's token if any, and where it came from. */
export interface AuditInitiator {
  userId?: string | undefined;
  userName?: string | undefined;
  projectId?: string | undefined;
  domainId?: string | undefined;
  /** Request address (after TRUSTED_PROXIES) and User-Agent. */
  address: string;
  agent?: string | undefined;
  requestId?: string | undefined;
}

/** pycadf's Reason: Keystone puts the exception text and its HTTP code there. */
export interface AuditReason {
  reasonType: string;
  reasonCode: string;
}

export interface CadfResource {
  typeURI: string;
  id: string;
  [attribute: string]: unknown;
}

export interface CadfEvent {
  typeURI: typeof CADF_EVENT_TYPE_URI;
  id: string;
  eventTime: string;
  eventType: 'activity';
  action: string;
  outcome: Outcome;
  initiator: CadfResource;
  target: CadfResource;
  observer: CadfResource;
  reason?: AuditReason;
  [attribute: string]: unknown;
}

/** oslo.messaging's envelope, as a notification consumer receives it. */
export interface AuditNotification {
  message_id: string;
  publisher_id: string;
  event_type: string;
  priority: 'INFO';
  timestamp: string;
  payload: CadfEvent;
}

export interface AuditSink {
  write(notification: AuditNotification): void;
}

export interface RoleAssignmentAudit {
  roleId: string;
  userId?: string | undefined;
  groupId?: string | undefined;
  projectId?: string | undefined;
  domainId?: string | undefined;
  system?: boolean | undefined;
  inherited: boolean;
}

/** A refusal decided by the gateway itself (not an answer of the service behind it). */
export interface GatewayDenialAudit {
  service: string;
  method: string;
  path: string;
  status: number;
  reason: string;
  rule?: string | undefined;
  tokenAuditId?: string | undefined;
}

const pad = (value: number, width = 2) => String(value).padStart(width, '0');

/** pycadf's timestamp: 2026-11-22T12:00:00.123000+0000. */
function cadfTime(milliseconds: number): string {
  return new Date(milliseconds).toISOString().replace(/\.(\d{3})Z$/, '.$1000+0000');
}

/** oslo's str(utcnow()): 2026-11-22 12:00:00.123000. */
function osloTime(milliseconds: number): string {
  const date = new Date(milliseconds);
  return (
    `${date.getUTCFullYear()}-${pad(date.getUTCMonth() + 1)}-${pad(date.getUTCDate())} ` +
    `${pad(date.getUTCHours())}:${pad(date.getUTCMinutes())}:${pad(date.getUTCSeconds())}.${pad(date.getUTCMilliseconds(), 3)}000`
  );
}

/** HTTP methods → CADF actions, as keystonemiddleware's audit middleware maps them. */
const METHOD_ACTIONS: Record<string, string> = {
  GET: 'read',
  HEAD: 'read',
  OPTIONS: 'read',
  POST: 'create',
  PUT: 'update',
  PATCH: 'update',
  DELETE: 'delete',
};

/** Builds the CADF events and hands each to every sink; never throws into the request. */
export class AuditTrail {
  private readonly publisher = `identity.${os.hostname()}`;

  constructor(
    private readonly sinks: readonly AuditSink[],
    private readonly clock: Clock,
  ) {}

  /** identity.authenticate: a POST /v3/auth/tokens (or self-service password check) and its outcome. */
  authenticate(outcome: Outcome, initiator: AuditInitiator, reason?: AuditReason): void {
    this.emit('identity.authenticate', {
      action: 'authenticate',
      outcome,
      initiator: this.initiator(initiator),
      target: { typeURI: ACCOUNT_USER, id: initiator.userId ?? randomUUID() },
      ...(reason ? { reason } : {}),
    });
  }

  /** identity.<type>.<operation>, e.g. identity.user.created; `actor` for group membership. */
  resource(
    operation: 'created' | 'updated' | 'deleted',
    resourceType: string,
    resourceId: string,
    initiator: AuditInitiator,
    actor?: { id: string; type: string; operation: 'added' | 'removed' },
  ): void {
    this.emit(`identity.${resourceType}.${operation}`, {
      action: `${operation}.${resourceType}`,
      outcome: 'success',
      initiator: this.initiator(initiator),
      target: { typeURI: TARGET_TYPES[resourceType] ?? 'unknown', id: resourceId },
      resource_info: resourceId,
      ...(actor ? { actor_id: actor.id, actor_type: actor.type, actor_operation: actor.operation } : {}),
    });
  }

  /** identity.role_assignment.created / .deleted, with Keystone's attributes. */
  roleAssignment(operation: 'created' | 'deleted', initiator: AuditInitiator, assignment: RoleAssignmentAudit): void {
    this.emit(`identity.role_assignment.${operation}`, {
      action: `${operation}.role_assignment`,
      outcome: 'success',
      initiator: this.initiator(initiator),
      target: { typeURI: ACCOUNT_USER, id: randomUUID() },
      ...(assignment.projectId ? { project: assignment.projectId } : {}),
      ...(assignment.domainId ? { domain: assignment.domainId } : {}),
      ...(assignment.system ? { system: 'all' } : {}),
      ...(assignment.userId ? { user: assignment.userId } : {}),
      ...(assignment.groupId ? { group: assignment.groupId } : {}),
      inherited_to_projects: assignment.inherited,
      role: assignment.roleId,
    });
  }

  /** identity.token.revoked: the token is named by its audit id only. */
  tokenRevoked(initiator: AuditInitiator, tokenAuditId: string): void {
    this.emit('identity.token.revoked', {
      action: 'revoke.token',
      outcome: 'success',
      initiator: this.initiator(initiator),
      target: { typeURI: TARGET_TYPES.token!, id: tokenAuditId },
      resource_info: tokenAuditId,
    });
  }

  /** gateway.request.denied: a 401 or 403 the gateway decided. */
  gatewayDenied(initiator: AuditInitiator, denial: GatewayDenialAudit): void {
    this.emit('gateway.request.denied', {
      action: METHOD_ACTIONS[denial.method] ?? 'unknown',
      outcome: 'failure',
      initiator: this.initiator(initiator),
      target: { typeURI: `service/${denial.service}`, id: denial.service, name: denial.service },
      observer: { typeURI: SERVICE_SECURITY, id: 'openstack:gateway', name: 'keystone-gateway' },
      reason: { reasonType: denial.reason, reasonCode: String(denial.status) },
      requestPath: denial.path,
      ...(denial.rule ? { rule: denial.rule } : {}),
      ...(denial.tokenAuditId ? { token_audit_id: denial.tokenAuditId } : {}),
    });
  }

  private initiator(initiator: AuditInitiator): CadfResource {
    const resource: CadfResource = {
      typeURI: ACCOUNT_USER,
      id: initiator.userId ?? randomUUID(),
      host: { address: initiator.address, ...(initiator.agent ? { agent: initiator.agent } : {}) },
    };
    if (initiator.userId) resource.user_id = initiator.userId;
    if (initiator.userName) {
      // Keystone: name/username for a known user; user_name for a name that matched nobody.
      if (initiator.userId) Object.assign(resource, { name: initiator.userName, username: initiator.userName });
      else resource.user_name = initiator.userName;
    }
    if (initiator.projectId) resource.project_id = initiator.projectId;
    if (initiator.domainId) resource.domain_id = initiator.domainId;
    if (initiator.requestId) resource.request_id = initiator.requestId;
    return resource;
  }

  private emit(
    eventType: string,
    event: { action: string; outcome: Outcome; initiator: CadfResource; target: CadfResource; observer?: CadfResource; [attribute: string]: unknown },
  ): void {
    const now = this.clock.now();
    const payload: CadfEvent = {
      typeURI: CADF_EVENT_TYPE_URI,
      id: randomUUID(),
      eventTime: cadfTime(now),
      eventType: 'activity',
      observer: { typeURI: SERVICE_SECURITY, id: 'openstack:identity', name: 'keystone-gateway' },
      ...event,
    };
    const notification: AuditNotification = {
      message_id: randomUUID(),
      publisher_id: this.publisher,
      event_type: eventType,
      priority: 'INFO',
      timestamp: osloTime(now),
      payload,
    };
    for (const sink of this.sinks) {
      try {
        sink.write(notification);
      } catch {
        // An audit sink must never fail the request it describes.
      }
    }
  }
}

interface Logger {
  info(object: object, message: string): void;
  warn(object: object, message: string): void;
}

/** Every event as one log line: {"msg":"audit","notification":{…}}. */
export class LogAuditSink implements AuditSink {
  constructor(private readonly log: Pick<Logger, 'info'>) {}

  write(notification: AuditNotification): void {
    this.log.info({ notification }, 'audit');
  }
}

/**
 * Every event appended to a Redis stream (XADD, capped near `maxLength` entries) with the fields
 * event_type and notification (JSON), for collectors that read with XREAD / consumer groups.
 * Fire and forget: a Redis outage loses stream entries (one warning per outage), never log lines.
 */
export class RedisStreamAuditSink implements AuditSink {
  private warned = false;

  constructor(
    private readonly redis: Redis,
    private readonly stream: string,
    private readonly maxLength: number,
    private readonly log: Pick<Logger, 'warn'>,
  ) {}

  write(notification: AuditNotification): void {
    this.redis
      .xadd(this.stream, 'MAXLEN', '~', String(this.maxLength), '*', 'event_type', notification.event_type, 'notification', JSON.stringify(notification))
      .then(
        () => {
          this.warned = false;
        },
        (error: unknown) => {
          if (!this.warned) this.log.warn({ err: error, stream: this.stream }, 'audit events cannot reach the Redis stream; they are still logged');
          this.warned = true;
        },
      );
  }
}
