import { createHash, randomUUID } from 'node:crypto';
import type { IdentityService } from '../identity/identity-service.ts';
import type { ResourceService } from '../resource/resource-service.ts';
import type { Clock } from '../support/clock.ts';
import { AuthenticationError, ConflictError, NotFoundError, ValidationError } from '../support/errors.ts';
import { newId } from '../support/ids.ts';
import type { EntityManager, Store } from '../store/database.ts';
import type { CredentialRow, Json } from '../store/entities.ts';
import { isUniqueViolation } from '../store/filters.ts';
import type { TokenContext, TokenService } from '../token/token-service.ts';
import type { CredentialEncryption } from './credential-encryption.ts';
import { CredentialRepository, type CredentialFilter } from './credential-repository.ts';
import { ec2Signature, requestTimestamp, s3Signature, signaturesEqual, UnsignableRequestError, type Ec2Request } from './ec2-signature.ts';

export type { CredentialFilter } from './credential-repository.ts';

/** A credential as the API shows it: the blob decrypted. */
export interface Credential {
  id: string;
  userId: string;
  projectId: string | null;
  type: string;
  blob: string;
  extra: Json;
}

export interface CredentialInput {
  type: string;
  blob: string;
  userId: string;
  projectId?: string | undefined;
  extra?: Json | undefined;
}

/** An EC2 credential as OS-EC2 shows it (Keystone's "legacy format"). */
export interface Ec2Credential {
  userId: string;
  tenantId: string | null;
  access: unknown;
  secret: unknown;
  trustId: unknown;
}

/** What /v3/ec2tokens and /v3/s3tokens receive: the signed request's parts. */
export type SignedCredentials = Record<string, unknown>;

const EC2 = 'ec2';

/** Keystone's utils.hash_access_key: an EC2 credential's id is the SHA-256 (hex) of its access key. */
export function ec2CredentialId(access: string): string {
  return createHash('sha256').update(access, 'utf8').digest('hex');
}

/** Python's json.dumps of a flat object (", " and ": " separators), as Keystone writes an OS-EC2 blob. */
function pythonJson(value: Record<string, unknown>): string {
  return `{${Object.entries(value)
    .map(([key, each]) => `${JSON.stringify(key)}: ${JSON.stringify(each)}`)
    .join(', ')}}`;
}

export interface CredentialServiceOptions {
  /** Keystone's [credential] auth_ttl: minutes a signed request's timestamp stays good. */
  authTtlMinutes: number;
}

/**
 * Keystone's credentials: /v3/credentials (any type, the blob encrypted at rest with the credential
 * keys), the OS-EC2 view of a user's ec2 credentials, and the signature checks of /v3/ec2tokens and
 * /v3/s3tokens that turn a signed request into a project-scoped token.
 */
export class CredentialService {
  private readonly repository = new CredentialRepository();

  constructor(
    private readonly store: Store,
    private readonly encryption: CredentialEncryption,
    private readonly identity: IdentityService,
    private readonly resources: ResourceService,
    private readonly tokens: TokenService,
    private readonly clock: Clock,
    private readonly options: CredentialServiceOptions,
  ) {}

  // ---- /v3/credentials ---------------------------------------------------------------------

  /** The credential, or undefined (policy targets are built from what exists). */
  async find(id: string, em: EntityManager = this.store.reader()): Promise<Credential | undefined> {
    const row = await this.repository.find(em, id);
    return row ? this.decrypted(row) : undefined;
  }

  async get(id: string, em: EntityManager = this.store.reader()): Promise<Credential> {
    const credential = await this.find(id, em);
    if (!credential) throw NotFoundError.of('credential', id);
    return credential;
  }

  async list(filter: CredentialFilter): Promise<Credential[]> {
    const rows = await this.repository.list(this.store.reader(), filter);
    return rows.map((row) => this.decrypted(row));
  }

  /** The secrets (blobs) of a user's `totp` credentials, for the totp auth method. */
  async totpSecrets(userId: string): Promise<string[]> {
    const rows = await this.repository.list(this.store.reader(), { userId: [{ operator: 'equals', value: userId }], type: [{ operator: 'equals', value: 'totp' }] });
    return rows.map((row) => this.decrypted(row).blob);
  }

  /**
   * An ec2 credential's blob must be a JSON object with `access`; its id is the hash of that
   * access key. Any other type gets a random id. Nothing checks that the user or project exists
   * (neither does Keystone).
   */
  async create(input: CredentialInput): Promise<Credential> {
    const id = input.type.toLowerCase() === EC2 ? ec2CredentialId(ec2Blob(input.blob).access) : newId();
    const { encryptedBlob, keyHash } = this.encryption.encrypt(input.blob);
    const row: CredentialRow = { id, userId: input.userId, projectId: input.projectId ?? null, type: input.type, encryptedBlob, keyHash, extra: input.extra ?? {} };
    try {
      await this.store.transaction((em) => this.repository.insert(em, row));
    } catch (error) {
      if (isUniqueViolation(error)) throw new ConflictError('credential', `Duplicate entry found with ID ${id}`);
      throw error;
    }
    return { id, userId: row.userId, projectId: row.projectId ?? null, type: row.type, blob: input.blob, extra: row.extra };
  }

  /**
   * Only the blob changes (Keystone 22's PATCH schema). An ec2 blob must stay valid and keep the
   * scope it had (trust_id, app_cred_id, access_token_id); its access key may change, its id does not.
   */
  update(id: string, blob: string): Promise<Credential> {
    return this.store.transaction(async (em) => {
      const row = await this.repository.find(em, id);
      if (!row) throw NotFoundError.of('credential', id);
      if (row.type.toLowerCase() === EC2) {
        const updated = ec2Blob(blob);
        const current = parseObject(this.encryption.decrypt(row.encryptedBlob)) ?? {};
        for (const key of ['trust_id', 'app_cred_id', 'access_token_id', 'access_id']) {
          if (!jsonEqual(current[key], updated.object[key])) throw new ValidationError(`${key} can not be updated for credential`);
        }
      }
      const { encryptedBlob, keyHash } = this.encryption.encrypt(blob);
      row.encryptedBlob = encryptedBlob;
      row.keyHash = keyHash;
      await this.repository.saveChanges(em);
      return { id: row.id, userId: row.userId, projectId: row.projectId ?? null, type: row.type, blob, extra: row.extra };
    });
  }

  delete(id: string): Promise<void> {
    return this.store.transaction(async (em) => {
      const row = await this.repository.find(em, id);
      if (!row) throw NotFoundError.of('credential', id);
      await this.repository.delete(em, row);
    });
  }

  // ---- OS-EC2 ------------------------------------------------------------------------------

  /** POST /v3/users/{user_id}/credentials/OS-EC2: a new access and secret for the user on the project. */
  async createEc2(userId: string, projectId: string | undefined): Promise<Ec2Credential> {
    await this.identity.getUser(userId);
    await this.resources.getProject(projectId ?? 'None');
    const blob = { access: randomUUID().replaceAll('-', ''), secret: randomUUID().replaceAll('-', ''), trust_id: null };
    const credential = await this.create({ type: EC2, blob: pythonJson(blob), userId, projectId });
    return ec2View(credential);
  }

  async listEc2(userId: string): Promise<Ec2Credential[]> {
    await this.identity.getUser(userId);
    const credentials = await this.list({ userId: [{ operator: 'equals', value: userId }], type: [{ operator: 'equals', value: EC2 }] });
    return credentials.map(ec2View);
  }

  /** The credential of an access key (any type), or Keystone's 404 for its id. */
  getByAccess(access: string): Promise<Credential> {
    return this.get(ec2CredentialId(access));
  }

  async getEc2(userId: string, access: string): Promise<Ec2Credential> {
    await this.identity.getUser(userId);
    return ec2View(await this.ec2ByAccess(access));
  }

  async deleteEc2(userId: string, access: string): Promise<void> {
    await this.identity.getUser(userId);
    const credential = await this.ec2ByAccess(access);
    await this.delete(credential.id);
  }

  /** 404 for no credential, 401 for one of another type (Keystone's answers). */
  private async ec2ByAccess(access: string): Promise<Credential> {
    const credential = await this.getByAccess(access);
    if (credential.type !== EC2) throw AuthenticationError.because({ reason: 'EC2 access key not found.', code: 401 });
    return credential;
  }

  // ---- /v3/ec2tokens and /v3/s3tokens --------------------------------------------------------

  /**
   * Keystone's EC2/S3 authentication: the credential of the access key, the signature, the user
   * and project (found and enabled), the timestamp within auth_ttl, then a project-scoped token with
   * the `ec2credential` method. Every failure of the signed request is the generic 401; an unknown
   * access key is Keystone 22's 404 for the credential's id.
   */
  async authenticate(kind: 'ec2' | 's3', body: Record<string, unknown> | undefined): Promise<TokenContext> {
    if (!body || Object.keys(body).length === 0) throw new ValidationError('request must include a request body');
    const credentials = (truthy(body.credentials) ?? truthy(body.credential) ?? truthy(body.ec2Credentials) ?? {}) as SignedCredentials;
    const refuse = (reason: string) => AuthenticationError.because({ reason, code: 401 });
    if (typeof credentials !== 'object' || Array.isArray(credentials) || !('access' in credentials)) throw refuse('EC2 Signature not supplied');
    if (typeof credentials.access !== 'string') throw refuse('EC2 access key not found.');
    const credential = await this.get(ec2CredentialId(credentials.access));
    if (credential.type !== EC2) throw refuse('EC2 access key not found.');
    const blob = parseObject(credential.blob) ?? {};
    const secret = typeof blob.secret === 'string' ? blob.secret : undefined;
    if (secret === undefined || !(kind === 'ec2' ? checkEc2Signature(secret, credentials) : checkS3Signature(secret, credentials))) {
      throw refuse('Invalid EC2 signature.');
    }
    if (!credential.projectId) throw NotFoundError.of('project', 'None');
    await this.resources.getProject(credential.projectId);
    const user = await this.identity.getUser(credential.userId);
    if (!user.enabled) throw refuse(`User is disabled: ${user.id}`);
    const timestamp = requestTimestamp(credentials as { params?: Record<string, unknown>; headers?: Record<string, unknown> });
    if (timestamp !== undefined) {
      if (Number.isNaN(timestamp)) throw refuse('Credential timestamp is invalid');
      if (this.clock.now() > timestamp + this.options.authTtlMinutes * 60_000) throw refuse('Credential is expired');
    }
    // A credential that names a trust (Keystone once stamped the trust of the token that made it)
    // gives a trust-scoped token with the trust's roles only.
    const trustId = typeof blob.trust_id === 'string' && blob.trust_id !== '' ? blob.trust_id : undefined;
    return this.tokens.issueForCredential(user.id, credential.projectId, 'ec2credential', { trustId });
  }

  private decrypted(row: CredentialRow): Credential {
    return { id: row.id, userId: row.userId, projectId: row.projectId ?? null, type: row.type, blob: this.encryption.decrypt(row.encryptedBlob), extra: row.extra };
  }
}

function truthy(value: unknown): unknown {
  if (value === undefined || value === null || value === false || value === 0 || value === '') return undefined;
  if (typeof value === 'object' && Object.keys(value as object).length === 0) return undefined;
  return value;
}

function parseObject(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function jsonEqual(a: unknown, b: unknown): boolean {
  return JSON.stringify(a ?? null) === JSON.stringify(b ?? null);
}

/** Keystone's _validate_blob_json: a JSON object with a non-null `access`. */
function ec2Blob(blob: string): { access: string; object: Record<string, unknown> } {
  let value: unknown;
  try {
    value = JSON.parse(blob);
  } catch {
    throw new ValidationError('Invalid blob in credential');
  }
  if (!value || typeof value !== 'object' || Array.isArray(value) || Object.keys(value).length === 0) throw ValidationError.expecting('blob', 'credential');
  const object = value as Record<string, unknown>;
  if (object.access === undefined || object.access === null) throw ValidationError.expecting('access', 'credential');
  if (typeof object.access !== 'string') throw ValidationError.field('blob', 'the access key must be a string');
  return { access: object.access, object };
}

function ec2View(credential: Credential): Ec2Credential {
  const blob = parseObject(credential.blob) ?? {};
  return { userId: credential.userId, tenantId: credential.projectId, access: blob.access ?? null, secret: blob.secret ?? null, trustId: blob.trust_id ?? null };
}

function asRecord(value: unknown): Record<string, unknown> {
  return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

/** The EC2 signature, and again without the port when the host has one (clients that sign without it). */
function checkEc2Signature(secret: string, credentials: SignedCredentials): boolean {
  const signature = credentials.signature;
  if (typeof signature !== 'string' || signature === '') return false;
  const host = typeof credentials.host === 'string' ? credentials.host : '';
  const request: Ec2Request = {
    params: asRecord(credentials.params),
    verb: typeof credentials.verb === 'string' ? credentials.verb : '',
    host,
    path: typeof credentials.path === 'string' ? credentials.path : '',
    headers: asRecord(credentials.headers),
    body_hash: typeof credentials.body_hash === 'string' ? credentials.body_hash : '',
  };
  try {
    if (signaturesEqual(signature, ec2Signature(secret, request))) return true;
    if (!host.includes(':')) return false;
    const hostname = new URL(`http://${host}`).hostname;
    return signaturesEqual(signature, ec2Signature(secret, { ...request, host: hostname }));
  } catch (error) {
    if (error instanceof UnsignableRequestError || error instanceof TypeError) return false;
    throw error;
  }
}

function checkS3Signature(secret: string, credentials: SignedCredentials): boolean {
  if (typeof credentials.token !== 'string' || typeof credentials.signature !== 'string') return false;
  try {
    return signaturesEqual(credentials.signature, s3Signature(secret, credentials.token));
  } catch (error) {
    if (error instanceof UnsignableRequestError) return false;
    throw error;
  }
}
