import { randomInt, randomUUID } from 'node:crypto';
import type { AssignmentService, Role } from '../assignment/assignment-service.ts';
import type { AccessEpoch } from '../events/access-epoch.ts';
import type { ResourceService } from '../resource/resource-service.ts';
import type { Clock } from '../support/clock.ts';
import { AuthenticationError, ForbiddenError, NotFoundError, ValidationError } from '../support/errors.ts';
import type { EntityManager, Store } from '../store/database.ts';
import type { Json, OAuth1AccessTokenRow, OAuth1ConsumerRow } from '../store/entities.ts';
import { OAuth1Repository } from './oauth1-repository.ts';
import type { SecretBox } from './secret-box.ts';
import { isSignatureMethod, parseAuthorizationHeader, queryParameters, SIGNATURE_METHODS, signatureBaseString, verifyOAuthSignature } from './signature.ts';

/** oauthlib's timestamp_lifetime: a signed request's timestamp may differ from now by this much. */
export const TIMESTAMP_WINDOW_SECONDS = 600;
/** Keystone's VERIFIER_CHARS: ASCII letters and digits but the easily confused 'jiIl1oO0'; verifiers have 8. */
const VERIFIER_CHARS = [...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'].filter((c) => !'jiIl1oO0'.includes(c)).join('');
const HEX32 = /^[0-9a-f]{32}$/;

export interface Consumer {
  id: string;
  description: string | null;
  /** Extra attributes given on create or update, returned as they were (Keystone's extra). */
  extra: Json;
}

export interface ConsumerInput {
  description?: string | null | undefined;
  extra: Json;
}

export interface IssuedCredential {
  id: string;
  secret: string;
  /** Null when the duration is 0 (never expires). */
  expiresAt: Date | null;
}

export interface AccessToken {
  id: string;
  authorizingUserId: string;
  projectId: string;
  consumerId: string;
  roleIds: string[];
  expiresAt: Date | null;
}

/** A request signed with OAuth 1.0a: as the client addressed it. */
export interface SignedRequest {
  method: string;
  /** The full URL the client signed: the public base URL and the path with its query. */
  url: string;
  authorization: string | undefined;
}

export interface OAuth1Durations {
  /** Seconds; 0: request tokens never expire. */
  requestToken: number;
  /** Seconds; 0: access tokens never expire. */
  accessToken: number;
}

/** Who authorizes a request token: the caller's token reduced to what the rules need. */
export interface Authorizer {
  userId: string;
  /** Set when the caller's token itself came from a delegation (OAuth1, a trust). */
  delegated: boolean;
}

/** OS-OAUTH1: consumers, the delegation flow (request token → authorize → access token) and its access tokens. */
export class OAuth1Service {
  constructor(
    private readonly store: Store,
    private readonly resources: ResourceService,
    private readonly assignments: AssignmentService,
    private readonly box: SecretBox,
    private readonly clock: Clock,
    private readonly durations: OAuth1Durations,
    /** Bumped when an access token or consumer is deleted (its tokens die without a revocation event). */
    private readonly accessEpoch?: AccessEpoch,
    private readonly repository = new OAuth1Repository(),
  ) {}

  // ---- consumers ---------------------------------------------------------------------------

  /** Keystone's secret: a random UUID's hex, returned once, kept encrypted. */
  async createConsumer(input: ConsumerInput): Promise<{ consumer: Consumer; secret: string }> {
    const id = newHexId();
    const secret = newHexId();
    const row = await this.store.transaction((em) =>
      this.repository.createConsumer(em, { id, description: input.description ?? null, secret: this.box.seal(secret, consumerContext(id)), extra: input.extra }),
    );
    return { consumer: toConsumer(row), secret };
  }

  async getConsumer(id: string): Promise<Consumer> {
    const row = await this.repository.findConsumer(this.store.reader(), id);
    if (!row) throw NotFoundError.oauth1('consumer');
    return toConsumer(row);
  }

  async listConsumers(): Promise<Consumer[]> {
    return (await this.repository.listConsumers(this.store.reader())).map(toConsumer);
  }

  async updateConsumer(id: string, patch: ConsumerInput): Promise<Consumer> {
    return this.store.transaction(async (em) => {
      const row = await this.repository.findConsumer(em, id);
      if (!row) throw NotFoundError.oauth1('consumer');
      if (patch.description !== undefined) row.description = patch.description;
      row.extra = { ...row.extra, ...patch.extra };
      await this.repository.flush(em);
      return toConsumer(row);
    });
  }

  /** Deletes a consumer with its request and access tokens: the tokens issued from them stop validating. */
  async deleteConsumer(id: string): Promise<void> {
    await this.store.transaction(async (em) => {
      const row = await this.repository.findConsumer(em, id);
      if (!row) throw NotFoundError.oauth1('consumer');
      await this.repository.deleteConsumer(em, row);
      await this.accessEpoch?.bump(em);
    });
  }

  // ---- the delegation flow -----------------------------------------------------------------

  /** POST /v3/OS-OAUTH1/request_token: signed by the consumer, for a project. */
  async createRequestToken(request: SignedRequest, requestedProjectId: string | undefined): Promise<IssuedCredential> {
    const parameters = oauthParameters(request);
    const consumerId = parameters.get('oauth_consumer_key');
    if (!consumerId) throw ValidationError.expecting('oauth_consumer_key', 'request');
    if (!requestedProjectId) throw ValidationError.expecting('Requested-Project-Id', 'request');
    const project = await this.resources.findAny(requestedProjectId);
    if (!project || project.isDomain) throw NotFoundError.of('project', requestedProjectId);
    const consumer = await this.repository.findConsumer(this.store.reader(), consumerId);
    if (!consumer) throw NotFoundError.oauth1('consumer');

    this.checkMandatory(parameters);
    if (!parameters.get('oauth_callback')) throw ValidationError.oauthParameters('invalid_request', 'Missing callback URI.');
    const consumerSecret = this.openSecret(consumer.secret, consumerContext(consumer.id));
    if (!verifySignature(request, parameters, consumerSecret, '')) throw AuthenticationError.oauth1('invalid signature');
    await this.recordNonce(consumer.id, parameters);

    const id = newHexId();
    const secret = newHexId();
    const expiresAt = this.expiry(this.durations.requestToken);
    await this.store.transaction((em) =>
      this.repository.createRequestToken(em, {
        id,
        secret: this.box.seal(secret, requestTokenContext(id)),
        verifier: null,
        authorizingUserId: null,
        requestedProjectId: project.id,
        roleIds: null,
        consumerId: consumer.id,
        expiresAt,
      }),
    );
    return { id, secret, expiresAt };
  }

  /** PUT /v3/OS-OAUTH1/authorize/{id}: the user delegates roles they hold on the requested project. */
  async authorizeRequestToken(requestTokenId: string, authorizer: Authorizer, roles: { id?: string | undefined; name?: string | undefined }[]): Promise<string> {
    // Keystone's text, 'Cannot authorize a request token with a token issued via delegation.', is
    // hidden from clients as every Forbidden's is: they see the generic one.
    if (authorizer.delegated) throw ForbiddenError.action();
    const found = await this.repository.findRequestToken(this.store.reader(), requestTokenId);
    if (!found) throw NotFoundError.oauth1('request token');
    if (this.expired(found.expiresAt)) throw AuthenticationError.oauth1('request token expired');
    const roleIds = new Set<string>();
    for (const role of roles) {
      if (role.id) roleIds.add(role.id);
      else roleIds.add(await this.roleIdByName(role.name!));
    }
    const held = new Set((await this.assignments.effectiveRoles(authorizer.userId, 'project', found.requestedProjectId)).map((role) => role.id));
    for (const roleId of roleIds) if (!held.has(roleId)) throw AuthenticationError.oauth1('role not held');
    return this.store.transaction(async (em) => {
      const token = await this.repository.findRequestToken(em, requestTokenId);
      // Exchanged meanwhile: gone, as it would be a moment later.
      if (!token) throw NotFoundError.oauth1('request token');
      token.authorizingUserId = authorizer.userId;
      token.verifier = newVerifier();
      token.roleIds = [...roleIds];
      await this.repository.flush(em);
      return token.verifier;
    });
  }

  /** POST /v3/OS-OAUTH1/access_token: signed by the consumer and the authorized request token, with its verifier. */
  async createAccessToken(request: SignedRequest): Promise<IssuedCredential> {
    const parameters = oauthParameters(request);
    const consumerId = parameters.get('oauth_consumer_key');
    const requestTokenId = parameters.get('oauth_token');
    const verifier = parameters.get('oauth_verifier');
    if (!consumerId) throw ValidationError.expecting('oauth_consumer_key', 'request');
    if (!requestTokenId) throw ValidationError.expecting('oauth_token', 'request');
    if (!verifier) throw ValidationError.expecting('oauth_verifier', 'request');
    const em = this.store.reader();
    const requestToken = await this.repository.findRequestToken(em, requestTokenId);
    if (!requestToken) throw NotFoundError.oauth1('request token');
    if (this.expired(requestToken.expiresAt)) throw AuthenticationError.oauth1('request token expired');

    this.checkMandatory(parameters);
    if (!HEX32.test(requestTokenId)) throw ValidationError.oauthParameters('invalid_request', 'Invalid resource owner key format.');
    if (verifier.length !== 8 || [...verifier].some((c) => !VERIFIER_CHARS.includes(c))) {
      throw ValidationError.oauthParameters('invalid_request', 'Invalid verifier format.');
    }
    const consumer = await this.repository.findConsumer(em, consumerId);
    if (!consumer) throw AuthenticationError.oauth1('no consumer');
    if (requestToken.consumerId !== consumerId) throw AuthenticationError.oauth1('consumer mismatch');
    const signed = verifySignature(request, parameters, this.openSecret(consumer.secret, consumerContext(consumer.id)), this.openSecret(requestToken.secret, requestTokenContext(requestToken.id)));
    if (requestToken.verifier !== verifier) throw AuthenticationError.oauth1('verifier mismatch');
    if (!signed) throw AuthenticationError.oauth1('invalid signature');
    await this.recordNonce(consumer.id, parameters);
    if (!requestToken.authorizingUserId) throw AuthenticationError.oauth1('not authorized');

    const id = newHexId();
    const secret = newHexId();
    const expiresAt = this.expiry(this.durations.accessToken);
    const exchanged = await this.store.transaction((tx) =>
      this.repository.exchangeRequestToken(tx, requestToken, {
        id,
        secret: this.box.seal(secret, accessTokenContext(id)),
        authorizingUserId: requestToken.authorizingUserId!,
        projectId: requestToken.requestedProjectId,
        roleIds: requestToken.roleIds ?? [],
        consumerId: consumer.id,
        expiresAt,
      }),
    );
    // Exchanged concurrently by another request: this one finds it gone, as a later one would.
    if (!exchanged) throw NotFoundError.oauth1('request token');
    return { id, secret, expiresAt };
  }

  /** The oauth1 auth method: a request signed by the consumer and an access token; returns the access token. */
  async authenticate(request: SignedRequest): Promise<AccessToken> {
    const parameters = oauthParameters(request);
    const accessTokenId = parameters.get('oauth_token');
    if (!accessTokenId) throw ValidationError.expecting('oauth_token', 'request');
    const em = this.store.reader();
    const accessToken = await this.repository.findAccessToken(em, accessTokenId);
    if (!accessToken) throw NotFoundError.oauth1('access token');
    if (this.expired(accessToken.expiresAt)) throw AuthenticationError.oauth1('access token expired');
    const consumerId = parameters.get('oauth_consumer_key');
    const consumer = consumerId === accessToken.consumerId ? await this.repository.findConsumer(em, consumerId) : null;
    let valid = consumer !== null;
    try {
      this.checkMandatory(parameters);
      if (!HEX32.test(accessTokenId)) valid = false;
    } catch {
      valid = false;
    }
    if (valid && consumer) {
      valid = verifySignature(
        request,
        parameters,
        this.openSecret(consumer.secret, consumerContext(consumer.id)),
        this.openSecret(accessToken.secret, accessTokenContext(accessToken.id)),
      );
    }
    if (!valid || !(await this.recordNonce(accessToken.consumerId, parameters, false))) throw AuthenticationError.oauth1('access token not validated');
    return toAccessToken(accessToken);
  }

  /** An access token by id, for token validation (null when deleted). */
  async findAccessToken(id: string): Promise<AccessToken | null> {
    const row = await this.repository.findAccessToken(this.store.reader(), id);
    return row ? toAccessToken(row) : null;
  }

  // ---- the user's access tokens ------------------------------------------------------------

  /** `delegated`: the caller's token came from a delegation (Keystone refuses it, its text hidden). */
  async listAccessTokens(userId: string, delegated = false): Promise<AccessToken[]> {
    if (delegated) throw ForbiddenError.action();
    return (await this.repository.listAccessTokens(this.store.reader(), userId)).map(toAccessToken);
  }

  async getAccessToken(userId: string, id: string): Promise<AccessToken> {
    const row = await this.repository.findAccessToken(this.store.reader(), id);
    if (!row) throw NotFoundError.oauth1('access token');
    if (row.authorizingUserId !== userId) throw NotFoundError.oauth1('another user');
    return toAccessToken(row);
  }

  /** Deletes an access token of the user: the tokens issued from it stop validating. */
  async deleteAccessToken(userId: string, id: string): Promise<void> {
    await this.store.transaction(async (em) => {
      const row = await this.repository.findAccessToken(em, id);
      if (!row) throw NotFoundError.oauth1('access token');
      if (row.authorizingUserId !== userId) throw AuthenticationError.oauth1('user mismatch');
      await this.repository.deleteAccessToken(em, row);
      await this.accessEpoch?.bump(em);
    });
  }

  /** The roles an access token delegates (those that still exist). */
  async accessTokenRoles(userId: string, id: string): Promise<Role[]> {
    const token = await this.getAccessToken(userId, id);
    return token.roleIds.length ? this.assignments.listRoles({ ids: token.roleIds }) : [];
  }

  async accessTokenRole(userId: string, id: string, roleId: string): Promise<Role> {
    const row = await this.repository.findAccessToken(this.store.reader(), id);
    if (!row) throw NotFoundError.oauth1('access token');
    if (row.authorizingUserId !== userId) throw AuthenticationError.oauth1('user mismatch');
    if (!row.roleIds.includes(roleId)) throw NotFoundError.of('role', roleId);
    return this.assignments.getRole(roleId);
  }

  /** Keystone's get_unique_role_by_name: a global role of that name. */
  private async roleIdByName(name: string): Promise<string> {
    const [role] = await this.assignments.listRoles({ name: [{ operator: 'equals', value: name }], domainId: null });
    if (!role) throw NotFoundError.oauth1Role(name);
    return role.id;
  }

  // ---- checks ------------------------------------------------------------------------------

  /** oauthlib's checks of the protocol parameters, in its order, with its messages. */
  private checkMandatory(parameters: Map<string, string>): void {
    const method = parameters.get('oauth_signature_method');
    const timestamp = parameters.get('oauth_timestamp');
    const nonce = parameters.get('oauth_nonce');
    const consumerId = parameters.get('oauth_consumer_key');
    if (!parameters.get('oauth_signature') || !consumerId || !nonce || !timestamp || !method) {
      throw ValidationError.oauthParameters('invalid_request', 'Missing mandatory OAuth parameters.');
    }
    if (!isSignatureMethod(method)) {
      // oauthlib's message prints the list as a Python tuple.
      throw ValidationError.oauthParameters('invalid_signature_method', `Invalid signature, ${method} not in (${SIGNATURE_METHODS.map((name) => `'${name}'`).join(', ')}).`);
    }
    if (parameters.has('oauth_version') && parameters.get('oauth_version') !== '1.0') throw ValidationError.oauthParameters('invalid_request', 'Invalid OAuth version.');
    if (timestamp.length !== 10) throw ValidationError.oauthParameters('invalid_request', 'Invalid timestamp size');
    if (!/^\d+$/.test(timestamp)) throw ValidationError.oauthParameters('invalid_request', 'Timestamp must be an integer.');
    if (Math.abs(this.clock.now() / 1000 - Number(timestamp)) > TIMESTAMP_WINDOW_SECONDS) {
      throw ValidationError.oauthParameters('invalid_request', `Timestamp given is invalid, differ from allowed by over ${TIMESTAMP_WINDOW_SECONDS} seconds.`);
    }
    if (!HEX32.test(consumerId)) throw ValidationError.oauthParameters('invalid_request', 'Invalid client key format.');
    if (!/^[0-9a-f]+$/.test(nonce) || nonce.length > 255) throw ValidationError.oauthParameters('invalid_request', 'Invalid nonce format.');
  }

  /**
   * A nonce is good once per consumer and timestamp (RFC 5849 §3.3; Keystone does not check). A
   * replayed one: the same 401 as a bad signature, or false when `refuse` is off.
   */
  private async recordNonce(consumerId: string, parameters: Map<string, string>, refuse = true): Promise<boolean> {
    const timestamp = Number(parameters.get('oauth_timestamp'));
    const forgetBefore = Math.floor(this.clock.now() / 1000) - 2 * TIMESTAMP_WINDOW_SECONDS;
    const fresh = await this.store.transaction((em: EntityManager) => this.repository.recordNonce(em, consumerId, parameters.get('oauth_nonce')!, timestamp, forgetBefore));
    if (!fresh && refuse) throw AuthenticationError.oauth1('invalid signature');
    return fresh;
  }

  private openSecret(stored: string, context: string): string {
    const secret = this.box.open(stored, context);
    // A secret sealed under another pepper: nothing can be signed with it.
    if (secret === undefined) throw AuthenticationError.oauth1('invalid signature');
    return secret;
  }

  private expiry(seconds: number): Date | null {
    return seconds > 0 ? new Date(this.clock.now() + seconds * 1000) : null;
  }

  private expired(expiresAt: Date | null | undefined): boolean {
    return expiresAt != null && this.clock.now() > expiresAt.getTime();
  }
}

function oauthParameters(request: SignedRequest): Map<string, string> {
  const parameters = parseAuthorizationHeader(request.authorization);
  if (!parameters) throw ValidationError.expecting('oauth_consumer_key', 'request');
  return parameters;
}

/** The signature over the request's query and Authorization parameters (Keystone signs no body). */
function verifySignature(request: SignedRequest, parameters: Map<string, string>, consumerSecret: string, tokenSecret: string): boolean {
  const method = parameters.get('oauth_signature_method')!;
  const signature = parameters.get('oauth_signature');
  if (!isSignatureMethod(method) || !signature) return false;
  const baseString = () => signatureBaseString(request.method, request.url, [...queryParameters(request.url), ...parameters]);
  return verifyOAuthSignature(method, baseString, signature, consumerSecret, tokenSecret);
}

function newHexId(): string {
  return randomUUID().replaceAll('-', '');
}

function newVerifier(): string {
  // Keystone samples 8 distinct characters.
  const pool = [...VERIFIER_CHARS];
  let verifier = '';
  for (let i = 0; i < 8; i++) verifier += pool.splice(randomInt(pool.length), 1)[0];
  return verifier;
}

const consumerContext = (id: string) => `consumer:${id}`;
const requestTokenContext = (id: string) => `request_token:${id}`;
const accessTokenContext = (id: string) => `access_token:${id}`;

function toConsumer(row: OAuth1ConsumerRow): Consumer {
  return { id: row.id, description: row.description ?? null, extra: row.extra ?? {} };
}

function toAccessToken(row: OAuth1AccessTokenRow): AccessToken {
  return {
    id: row.id,
    authorizingUserId: row.authorizingUserId,
    projectId: row.projectId,
    consumerId: row.consumerId,
    roleIds: row.roleIds,
    expiresAt: row.expiresAt ?? null,
  };
}

