import type { Clock } from '../support/clock.ts';
import type { EntityManager, Store } from '../store/database.ts';
import { RevocationEventEntity, type RevocationEventRow } from '../store/entities.ts';

/** A Keystone revocation event: every attribute that is set must match the token. Times in ms. */
export interface RevocationEvent {
  /** Database id, once stored. */
  id?: number | undefined;
  userId?: string | undefined;
  projectId?: string | undefined;
  domainId?: string | undefined;
  roleId?: string | undefined;
  trustId?: string | undefined;
  consumerId?: string | undefined;
  accessTokenId?: string | undefined;
  auditId?: string | undefined;
  auditChainId?: string | undefined;
  expiresAt?: number | undefined;
  /** Tokens issued at or before this second are revoked. */
  issuedBefore: number;
  revokedAt: number;
}

/** What a revocation check needs to know about a token. */
export interface RevocableToken {
  userId: string;
  userDomainId?: string | undefined;
  projectId?: string | undefined;
  /** The project's domain, or the scoped domain for a domain token. */
  assignmentDomainId?: string | undefined;
  roleIds: readonly string[];
  auditId: string;
  auditChainId: string;
  trustId?: string | undefined;
  /** Trust-scoped tokens: an event's user_id also matches the trustor and the trustee (Keystone). */
  trustorId?: string | undefined;
  trusteeId?: string | undefined;
  /** Whole seconds, from the token. */
  issuedAt: number;
}

type Attribute = 'auditId' | 'auditChainId' | 'userId' | 'projectId' | 'domainId' | 'roleId' | 'trustId' | 'consumerId' | 'accessTokenId';

// An event is filed under its most selective attribute, so a check looks at a handful of short lists
// whatever the total number of events (Keystone's linear scan made validation take seconds).
const FILING_ORDER: Attribute[] = ['auditId', 'auditChainId', 'userId', 'projectId', 'trustId', 'accessTokenId', 'consumerId', 'domainId', 'roleId'];

function filingKey(event: RevocationEvent): string {
  for (const attribute of FILING_ORDER) {
    const value = event[attribute];
    if (value) return `${attribute}:${value}`;
  }
  return 'all';
}

const CATCH_UP_OVERLAP_MS = 60_000;

/** How far ahead of this node's clock a carried event's revoked_at may be (clocks of nodes differ a little). */
const CARRIED_CLOCK_SKEW_MS = 60_000;

function wholeSeconds(milliseconds: number): number {
  return Math.floor(milliseconds / 1000) * 1000;
}

/**
 * Revocation events: written to the database in the caller's transaction and indexed in memory for
 * the validation hot path. The index is updated when the event is recorded (before commit), so a
 * rolled-back change can only make validation stricter, never looser.
 */
export class Revocations {
  private readonly filed = new Map<string, RevocationEvent[]>();
  /** Ids of the events indexed from the database (read, or recorded here). */
  private readonly known = new Set<number>();
  /** Ids of the events indexed as other nodes' messages carried them (not yet read from the database). */
  private readonly carried = new Set<number>();
  /**
   * revoked_at of the newest event read from the database, where catching up starts. Only load()
   * and catchUp() move it: an event applied from a message says nothing of older events this node
   * has not read (another node may have written one unannounced while cut off from Redis).
   */
  private readFromDatabaseUpTo = 0;
  /** Bumped whenever the index changes: a token found unrevoked at the current version still is. */
  private version = 0;
  /**
   * Per token (the validation cache keeps one object per token), the version at which it was last
   * found unrevoked: a cache hit then costs one lookup, not a string key per attribute.
   */
  private readonly unrevokedAt = new WeakMap<RevocableToken, number>();

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
  ) {}

  async load(): Promise<void> {
    const rows = await this.store.reader().find(RevocationEventEntity, {}, { orderBy: { id: 'asc' } });
    this.filed.clear();
    this.known.clear();
    this.carried.clear();
    this.version++;
    for (const row of rows) this.indexRead(fromRow(row));
  }

  /**
   * Indexes events other nodes stored since we last looked. The window reaches back a minute before
   * the newest event seen, because a transaction that took an earlier id may commit later.
   */
  async catchUp(): Promise<number> {
    const since = new Date(Math.max(0, this.readFromDatabaseUpTo - CATCH_UP_OVERLAP_MS));
    const rows = await this.store.reader().find(RevocationEventEntity, { revokedAt: { $gte: since } }, { orderBy: { id: 'asc' } });
    let added = 0;
    for (const row of rows) {
      if (this.indexRead(fromRow(row))) added++;
    }
    return added;
  }

  /** Transactions (their entity managers) that recorded an event: the id of the last one. */
  private readonly recordedIn = new WeakMap<EntityManager, number>();

  /** The id of an event `transaction` recorded, if it recorded any. */
  eventRecordedIn(transaction: EntityManager): number | undefined {
    return this.recordedIn.get(transaction);
  }

  /** Every event each transaction recorded: the message after its commit carries them to the other nodes. */
  private readonly recordedEvents = new WeakMap<EntityManager, RevocationEvent[]>();

  private recordedEventsOf(transaction: EntityManager): RevocationEvent[] {
    let events = this.recordedEvents.get(transaction);
    if (!events) this.recordedEvents.set(transaction, (events = []));
    return events;
  }

  /** The events `transaction` recorded (none: an empty list). */
  eventsRecordedIn(transaction: EntityManager): readonly RevocationEvent[] {
    return this.recordedEvents.get(transaction) ?? [];
  }

  /**
   * Indexes events another node recorded, as its message carried them: a node that cannot read the
   * database still applies revocations to what it serves from its caches.
   */
  apply(events: readonly RevocationEvent[]): void {
    // Anyone who can publish on the channel can send these: they may only add revocations. Their ids
    // are kept apart (the database's event of that id is still read), and a revoked_at far ahead is
    // brought back to now (it moves nothing, but is never kept as a date in the future).
    const latest = this.clock.now() + CARRIED_CLOCK_SKEW_MS;
    for (const event of events) {
      if (event.id !== undefined) {
        if (this.known.has(event.id) || this.carried.has(event.id)) continue;
        this.carried.add(event.id);
      }
      this.index({ ...event, revokedAt: Math.min(event.revokedAt, latest) });
    }
  }

  /** Writes an event in the given transaction; issued_before and revoked_at default to now. */
  async record(em: EntityManager, attributes: Omit<RevocationEvent, 'issuedBefore' | 'revokedAt'>): Promise<RevocationEvent> {
    const now = wholeSeconds(this.clock.now());
    const event: RevocationEvent = { ...attributes, issuedBefore: now, revokedAt: now };
    const row = em.create(RevocationEventEntity, {
      userId: event.userId ?? null,
      projectId: event.projectId ?? null,
      domainId: event.domainId ?? null,
      roleId: event.roleId ?? null,
      trustId: event.trustId ?? null,
      consumerId: event.consumerId ?? null,
      accessTokenId: event.accessTokenId ?? null,
      auditId: event.auditId ?? null,
      auditChainId: event.auditChainId ?? null,
      expiresAt: event.expiresAt === undefined ? null : new Date(wholeSeconds(event.expiresAt)),
      issuedBefore: new Date(event.issuedBefore),
      revokedAt: new Date(event.revokedAt),
    });
    await em.flush();
    event.id = row.id;
    this.recordedIn.set(em, row.id);
    this.recordedEventsOf(em).push(event);
    // Not a read: the transaction may still roll back, and events written elsewhere meanwhile are unread.
    this.known.add(row.id);
    this.index(event);
    return event;
  }

  isRevoked(token: RevocableToken): boolean {
    if (this.unrevokedAt.get(token) === this.version) return false;
    const issuedAt = wholeSeconds(token.issuedAt);
    const keys = [`auditId:${token.auditId}`, `auditChainId:${token.auditChainId}`, `userId:${token.userId}`, 'all'];
    if (token.projectId) keys.push(`projectId:${token.projectId}`);
    if (token.trustId) keys.push(`trustId:${token.trustId}`);
    if (token.trustorId) keys.push(`userId:${token.trustorId}`);
    if (token.trusteeId && token.trusteeId !== token.userId) keys.push(`userId:${token.trusteeId}`);
    if (token.userDomainId) keys.push(`domainId:${token.userDomainId}`);
    if (token.assignmentDomainId) keys.push(`domainId:${token.assignmentDomainId}`);
    for (const roleId of token.roleIds) keys.push(`roleId:${roleId}`);
    for (const key of keys) {
      const events = this.filed.get(key);
      if (!events) continue;
      for (const event of events) {
        if (event.issuedBefore >= issuedAt && matches(event, token)) return true;
      }
    }
    this.unrevokedAt.set(token, this.version);
    return false;
  }

  /** Events revoked after `since` (ms), oldest first, from the database. */
  async list(since?: number): Promise<RevocationEvent[]> {
    const where = since === undefined ? {} : { revokedAt: { $gt: new Date(since) } };
    const rows = await this.store.reader().find(RevocationEventEntity, where, { orderBy: { id: 'asc' } });
    return rows.map(fromRow);
  }

  /** Indexes an event read from the database (unless known) and moves the catch-up start; whether it was new. */
  private indexRead(event: RevocationEvent): boolean {
    // A row dated ahead (a node whose clock runs fast) must not put later catch-ups past what others write.
    this.readFromDatabaseUpTo = Math.max(this.readFromDatabaseUpTo, Math.min(event.revokedAt, this.clock.now() + CARRIED_CLOCK_SKEW_MS));
    if (this.known.has(event.id!)) return false;
    this.known.add(event.id!);
    this.index(event);
    return true;
  }

  private index(event: RevocationEvent): void {
    this.version++;
    const key = filingKey(event);
    const events = this.filed.get(key);
    if (events) events.push(event);
    else this.filed.set(key, [event]);
  }
}

function matches(event: RevocationEvent, token: RevocableToken): boolean {
  if (event.auditId && event.auditId !== token.auditId) return false;
  if (event.auditChainId && event.auditChainId !== token.auditChainId) return false;
  if (event.userId && event.userId !== token.userId && event.userId !== token.trustorId && event.userId !== token.trusteeId) return false;
  if (event.projectId && event.projectId !== token.projectId) return false;
  if (event.trustId && event.trustId !== token.trustId) return false;
  if (event.domainId && event.domainId !== token.userDomainId && event.domainId !== token.assignmentDomainId) return false;
  if (event.roleId && !token.roleIds.includes(event.roleId)) return false;
  // Consumer and access-token events only concern OAuth1 tokens, which are not issued here.
  if (event.consumerId || event.accessTokenId) return false;
  return true;
}

const EVENT_TEXT_ATTRIBUTES = ['userId', 'projectId', 'domainId', 'roleId', 'trustId', 'consumerId', 'accessTokenId', 'auditId', 'auditChainId'] as const;

/** Revocation events as a message carried them (JSON from another node), or undefined when any is malformed. */
export function parseRevocationEvents(value: unknown): RevocationEvent[] | undefined {
  if (!Array.isArray(value) || value.length > 1000) return undefined;
  const events: RevocationEvent[] = [];
  for (const item of value) {
    if (!item || typeof item !== 'object') return undefined;
    const raw = item as Record<string, unknown>;
    if (!Number.isInteger(raw.id) || !Number.isFinite(raw.issuedBefore) || !Number.isFinite(raw.revokedAt)) return undefined;
    if (raw.expiresAt !== undefined && !Number.isFinite(raw.expiresAt)) return undefined;
    const event: RevocationEvent = {
      id: raw.id as number,
      issuedBefore: raw.issuedBefore as number,
      revokedAt: raw.revokedAt as number,
      ...(raw.expiresAt === undefined ? {} : { expiresAt: raw.expiresAt as number }),
    };
    for (const attribute of EVENT_TEXT_ATTRIBUTES) {
      const text = raw[attribute];
      if (text === undefined || text === null) continue;
      if (typeof text !== 'string') return undefined;
      event[attribute] = text;
    }
    events.push(event);
  }
  return events;
}

function fromRow(row: RevocationEventRow): RevocationEvent {
  return {
    id: row.id,
    userId: row.userId ?? undefined,
    projectId: row.projectId ?? undefined,
    domainId: row.domainId ?? undefined,
    roleId: row.roleId ?? undefined,
    trustId: row.trustId ?? undefined,
    consumerId: row.consumerId ?? undefined,
    accessTokenId: row.accessTokenId ?? undefined,
    auditId: row.auditId ?? undefined,
    auditChainId: row.auditChainId ?? undefined,
    expiresAt: row.expiresAt?.getTime(),
    issuedBefore: row.issuedBefore.getTime(),
    revokedAt: row.revokedAt.getTime(),
  };
}
