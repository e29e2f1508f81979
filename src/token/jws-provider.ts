import { calculateJwkThumbprint, compactVerify, exportJWK, importPKCS8, importSPKI, SignJWT, type JWK } from 'jose';
import { NotFoundError } from '../support/errors.ts';
import type { TokenPayload } from './fernet-payload.ts';
import { jwsFingerprints, type KeySetFingerprints } from './key-agreement.ts';
import type { JwsKeySource } from './key-source.ts';
import type { DecodedToken, TokenProvider } from './token-provider.ts';

type SigningKey = Awaited<ReturnType<typeof importPKCS8>>;

interface VerificationKey {
  kid: string;
  key: SigningKey;
  jwk: JWK;
}

interface Logger {
  info(object: object, message: string): void;
  error(object: object, message: string): void;
}

/** Keystone's JWS claims (keystone.token.token_formatters.JWSFormatter). */
interface KeystoneClaims {
  sub: string;
  iat: number;
  exp: number;
  openstack_methods: string[];
  openstack_audit_ids: string[];
  openstack_project_id?: string;
  openstack_domain_id?: string;
  openstack_system?: string;
  openstack_app_cred_id?: string;
  openstack_trust_id?: string;
  /** A federated token's (Keystone's federated_group_ids, identity_provider_id, protocol_id). */
  openstack_group_ids?: string[];
  openstack_idp_id?: string;
  openstack_protocol_id?: string;
}

const INVALID = () => NotFoundError.tokenNotValidated();

/**
 * ES256 JSON Web Signature tokens, claims as Keystone's JWS provider writes them, so services can
 * verify them offline with the published JWKS (GET /v3/auth/jwks).
 */
export class JwsTokenProvider implements TokenProvider {
  readonly name = 'jws';
  private signing: { key: SigningKey; kid: string } | undefined;
  private verification: VerificationKey[] = [];
  /** Of the loaded keys (JWK thumbprints). */
  keyFingerprints: KeySetFingerprints | undefined;
  private stopWatching: (() => void) | undefined;
  private readonly reloadListeners: (() => void)[] = [];
  /** False after a failed reload, until one succeeds (readyz). */
  private lastReloadSucceeded = false;
  /** The last reload started (reload() chains each on it). */
  private reloads: Promise<void> = Promise.resolve();

  constructor(
    readonly repository: JwsKeySource,
    private readonly log: Logger,
  ) {}

  async start(): Promise<void> {
    const outcome = await this.repository.setup();
    if (outcome === 'created') this.log.info({ repository: this.repository.description }, 'created a new JWS key pair');
    if (outcome === 'imported') this.log.info({ repository: this.repository.description }, 'imported the JWS keys of JWS_KEY_REPOSITORY');
    await this.reload();
    this.stopWatching = this.repository.watch(() => {
      this.reload().then(
        () => this.log.info({ repository: this.repository.description }, 'reloaded JWS keys'),
        (error: unknown) => {
          this.lastReloadSucceeded = false;
          this.log.error({ err: error }, 'JWS key reload failed; keeping the previous keys');
        },
      );
    });
  }

  /** Keys are loaded and the last reload worked (readyz). */
  get keysReady(): boolean {
    return this.signing !== undefined && this.lastReloadSucceeded;
  }

  stop(): void {
    this.stopWatching?.();
  }

  /**
   * Loads the keys and uses them. Every reload (the watcher's, a key-change notice's, a caller's)
   * waits for the ones before it and reads the keys when its turn comes: a slow one, started before
   * a rotation, can never replace the keys a later one loaded.
   */
  reload(): Promise<void> {
    const reload = this.reloads.then(() => this.load());
    this.reloads = reload.catch(() => undefined);
    return reload;
  }

  private async load(): Promise<void> {
    const files = await this.repository.load();
    const verification: VerificationKey[] = [];
    for (const file of files.publicKeys) {
      const key = await importSPKI(file.pem, 'ES256', { extractable: true });
      const jwk = await exportJWK(key);
      const kid = await calculateJwkThumbprint(jwk);
      verification.push({ kid, key, jwk: { ...jwk, kid, alg: 'ES256', use: 'sig' } });
    }
    const signingKey = await importPKCS8(files.privateKey, 'ES256', { extractable: true });
    // The signing key's public half is the one whose thumbprint matches; it must be published.
    const { d: _private, ...publicHalf } = await exportJWK(signingKey);
    const signingKid = await calculateJwkThumbprint(publicHalf);
    if (!verification.some((entry) => entry.kid === signingKid)) {
      throw new Error(`the JWS signing key's public key is not among the public keys of ${this.repository.description}`);
    }
    this.verification = verification;
    this.signing = { key: signingKey, kid: signingKid };
    this.keyFingerprints = jwsFingerprints(
      signingKid,
      verification.map((entry, index) => ({ name: files.publicKeys[index]!.name, thumbprint: entry.kid })),
    );
    this.lastReloadSucceeded = true;
    for (const listener of this.reloadListeners) listener();
  }

  onReload(listener: () => void): void {
    this.reloadListeners.push(listener);
  }

  /** The public keys, for GET /v3/auth/jwks. */
  jwks(): { keys: JWK[] } {
    return { keys: this.verification.map((entry) => entry.jwk) };
  }

  async issue(payload: TokenPayload, issuedAtSeconds: number): Promise<string> {
    if (!this.signing) throw new Error('JWS keys are not loaded: call start() first');
    const claims: Record<string, unknown> = {
      sub: payload.userId,
      iat: issuedAtSeconds,
      exp: Math.floor(payload.expiresAt),
      openstack_methods: payload.methods,
      openstack_audit_ids: payload.auditIds,
    };
    const scope = payload.scope;
    switch (scope.type) {
      case 'project':
        claims.openstack_project_id = scope.projectId;
        break;
      case 'domain':
        claims.openstack_domain_id = scope.domainId;
        break;
      case 'system':
        claims.openstack_system = 'all';
        break;
      case 'application_credential':
        claims.openstack_project_id = scope.projectId;
        claims.openstack_app_cred_id = scope.applicationCredentialId;
        break;
      case 'unscoped':
        break;
      // Keystone's JWSFormatter writes a federated token's groups, provider and protocol as claims of
      // their own beside its project or domain.
      case 'federated_unscoped':
      case 'federated_project':
      case 'federated_domain':
        if (scope.type === 'federated_project') claims.openstack_project_id = scope.projectId;
        if (scope.type === 'federated_domain') claims.openstack_domain_id = scope.domainId;
        claims.openstack_group_ids = scope.groupIds;
        claims.openstack_idp_id = scope.identityProviderId;
        claims.openstack_protocol_id = scope.protocolId;
        break;
      default:
        throw new Error(`JWS tokens for ${scope.type} scope are not issued here`);
    }
    return new SignJWT(claims).setProtectedHeader({ alg: 'ES256', typ: 'JWT', kid: this.signing.kid }).sign(this.signing.key);
  }

  async decode(token: string): Promise<DecodedToken> {
    const parts = token.split('.');
    if (parts.length !== 3) throw INVALID();
    let header: { kid?: string; alg?: string };
    try {
      header = JSON.parse(Buffer.from(parts[0]!, 'base64url').toString('utf8')) as { kid?: string; alg?: string };
    } catch {
      throw INVALID();
    }
    if (header.alg !== 'ES256') throw INVALID();
    // Tokens of a Keystone have no kid: try every published key.
    const candidates = header.kid ? this.verification.filter((entry) => entry.kid === header.kid) : this.verification;
    for (const candidate of candidates) {
      let verified;
      try {
        verified = await compactVerify(token, candidate.key, { algorithms: ['ES256'] });
      } catch {
        continue;
      }
      return toPayload(verified.payload);
    }
    throw INVALID();
  }
}

function toPayload(raw: Uint8Array): DecodedToken {
  let claims: KeystoneClaims;
  try {
    claims = JSON.parse(Buffer.from(raw).toString('utf8')) as KeystoneClaims;
  } catch {
    throw INVALID();
  }
  const strings = (value: unknown): value is string[] => Array.isArray(value) && value.every((item) => typeof item === 'string');
  if (typeof claims.sub !== 'string' || !Number.isInteger(claims.iat) || !Number.isFinite(claims.exp)) throw INVALID();
  if (!strings(claims.openstack_methods) || !strings(claims.openstack_audit_ids) || claims.openstack_audit_ids.length === 0) throw INVALID();
  let scope: TokenPayload['scope'];
  if (claims.openstack_idp_id !== undefined || claims.openstack_protocol_id !== undefined || claims.openstack_group_ids !== undefined) {
    // A federated token: all three claims, well typed, or it is no token of ours (nor Keystone's).
    const groupIds = claims.openstack_group_ids ?? [];
    if (typeof claims.openstack_idp_id !== 'string' || typeof claims.openstack_protocol_id !== 'string' || !strings(groupIds)) throw INVALID();
    if (claims.openstack_trust_id || claims.openstack_app_cred_id || claims.openstack_system) throw INVALID();
    const federation = { groupIds, identityProviderId: claims.openstack_idp_id, protocolId: claims.openstack_protocol_id };
    if (claims.openstack_project_id) scope = { type: 'federated_project', projectId: claims.openstack_project_id, ...federation };
    else if (claims.openstack_domain_id) scope = { type: 'federated_domain', domainId: claims.openstack_domain_id, ...federation };
    else scope = { type: 'federated_unscoped', ...federation };
  } else if (claims.openstack_app_cred_id && claims.openstack_project_id) {
    scope = { type: 'application_credential', projectId: claims.openstack_project_id, applicationCredentialId: claims.openstack_app_cred_id };
  } else if (claims.openstack_trust_id && claims.openstack_project_id) {
    scope = { type: 'trust', projectId: claims.openstack_project_id, trustId: claims.openstack_trust_id };
  } else if (claims.openstack_project_id) {
    scope = { type: 'project', projectId: claims.openstack_project_id };
  } else if (claims.openstack_domain_id) {
    scope = { type: 'domain', domainId: claims.openstack_domain_id };
  } else if (claims.openstack_system) {
    scope = { type: 'system' };
  } else {
    scope = { type: 'unscoped' };
  }
  return {
    payload: { userId: claims.sub, methods: claims.openstack_methods, expiresAt: claims.exp, auditIds: claims.openstack_audit_ids, scope },
    issuedAt: claims.iat,
  };
}
