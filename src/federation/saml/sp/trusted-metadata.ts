// The identity providers this service trusts as SAML service provider: the metadata the operator
// names (SAML_TRUSTED_IDP_METADATA), files re-read when they change (size or mtime) and URLs fetched
// again every SAML_METADATA_REFRESH_SECONDS (the clock is injected). A source that cannot be read
// keeps its last good content. Only the signing certificates of IDPSSODescriptor KeyDescriptors
// (use="signing" or no use) are kept; they are the only keys a signature is ever checked against.

import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import type { Clock } from '../../../support/clock.ts';
import { NS } from '../namespaces.ts';
import { children, descendants, parseUntrustedXml, textOf } from './safe-xml.ts';

export interface TrustedEntity {
  entityId: string;
  /** PEM certificates, as they appear in the metadata. */
  certificates: string[];
  /** Where the entity was read (a file or URL), for logs. */
  source: string;
  /** The IDPSSODescriptors' SingleSignOnService endpoints (where websso sends the browser). */
  singleSignOnServices: Array<{ binding: string; location: string }>;
  /** An IDPSSODescriptor says WantAuthnRequestsSigned="true". */
  wantAuthnRequestsSigned: boolean;
}

export interface MetadataLog {
  warn(object: object, message: string): void;
}

export interface TrustedMetadataOptions {
  clock: Clock;
  refreshMs: number;
  httpTimeoutMs: number;
  fetch?: (url: string, init: RequestInit) => Promise<Response>;
  log?: MetadataLog;
}

interface SourceState {
  /** Files: `${mtimeMs}:${size}` of what was read; URLs: undefined. */
  version?: string;
  /** URLs: when the source was last fetched (successfully or not). */
  fetchedAt?: number;
  entities: TrustedEntity[];
  /** The last read failed and nothing was ever read: entities may be missing. */
  failed: boolean;
  /** The entities' validUntil (ms), when given. */
  validUntil: Map<string, number>;
}

/** Metadata that does not parse, or names no identity provider with a signing certificate. */
export class MetadataError extends Error {
  override name = 'MetadataError';
}

/** The identity providers of one metadata document (EntityDescriptor or EntitiesDescriptor). */
export function parseIdpMetadata(xml: string, source: string): { entities: TrustedEntity[]; validUntil: Map<string, number> } {
  let document: Document;
  try {
    document = parseUntrustedXml(xml);
  } catch (error) {
    throw new MetadataError(`${source}: ${(error as Error).message}`);
  }
  const root = document.documentElement as Element;
  if (root.namespaceURI !== NS.metadata || (root.localName !== 'EntityDescriptor' && root.localName !== 'EntitiesDescriptor')) {
    throw new MetadataError(`${source}: not SAML metadata (an EntityDescriptor or EntitiesDescriptor)`);
  }
  const descriptors = root.localName === 'EntityDescriptor' ? [root] : descendants(root, NS.metadata, 'EntityDescriptor');
  const entities: TrustedEntity[] = [];
  const validUntil = new Map<string, number>();
  for (const descriptor of descriptors) {
    const entityId = descriptor.getAttribute('entityID') ?? '';
    if (!entityId) continue;
    const certificates: string[] = [];
    const singleSignOnServices: TrustedEntity['singleSignOnServices'] = [];
    let wantAuthnRequestsSigned = false;
    for (const idp of children(descriptor, NS.metadata, 'IDPSSODescriptor')) {
      if (['true', '1'].includes((idp.getAttribute('WantAuthnRequestsSigned') ?? '').trim())) wantAuthnRequestsSigned = true;
      for (const service of children(idp, NS.metadata, 'SingleSignOnService')) {
        const binding = service.getAttribute('Binding') ?? '';
        const location = service.getAttribute('Location') ?? '';
        if (binding && location) singleSignOnServices.push({ binding, location });
      }
      for (const key of children(idp, NS.metadata, 'KeyDescriptor')) {
        const use = key.getAttribute('use');
        if (use && use !== 'signing') continue;
        for (const keyInfo of children(key, NS.xmldsig, 'KeyInfo')) {
          for (const data of children(keyInfo, NS.xmldsig, 'X509Data')) {
            for (const certificate of children(data, NS.xmldsig, 'X509Certificate')) {
              try {
                certificates.push(new crypto.X509Certificate(Buffer.from(textOf(certificate).replace(/\s+/g, ''), 'base64')).toString());
              } catch {
                throw new MetadataError(`${source}: a signing certificate of ${entityId} is not an X.509 certificate`);
              }
            }
          }
        }
      }
    }
    if (certificates.length === 0) continue;
    entities.push({ entityId, certificates, source, singleSignOnServices, wantAuthnRequestsSigned });
    const until = latestValidUntil(descriptor);
    if (until !== undefined) validUntil.set(entityId, until);
  }
  if (entities.length === 0) throw new MetadataError(`${source}: no identity provider (IDPSSODescriptor) with a signing certificate`);
  return { entities, validUntil };
}

/** The earliest validUntil of the descriptor and its enclosing EntitiesDescriptors. */
function latestValidUntil(descriptor: Element): number | undefined {
  let earliest: number | undefined;
  for (let node: Node | null = descriptor; node && node.nodeType === 1; node = node.parentNode) {
    const value = (node as Element).getAttribute('validUntil');
    if (!value) continue;
    const time = Date.parse(value);
    if (Number.isNaN(time)) continue;
    earliest = earliest === undefined ? time : Math.min(earliest, time);
  }
  return earliest;
}

export class TrustedIdpMetadata {
  private readonly states = new Map<string, SourceState>();
  private readonly fetch: (url: string, init: RequestInit) => Promise<Response>;

  constructor(
    private readonly sources: readonly string[],
    private readonly options: TrustedMetadataOptions,
  ) {
    this.fetch = options.fetch ?? ((url, init) => fetch(url, init));
  }

  /**
   * The trusted identity provider with this entity id, its metadata re-read first if it changed.
   * `incomplete` is true when a source could never be read (the entity may be in it).
   */
  async entity(entityId: string): Promise<{ entity: TrustedEntity | undefined; incomplete: boolean }> {
    await Promise.all(this.sources.map((source) => this.refresh(source)));
    const now = this.options.clock.now();
    let incomplete = false;
    for (const source of this.sources) {
      const state = this.states.get(source);
      if (!state || state.failed) {
        incomplete = true;
        continue;
      }
      const entity = state.entities.find((candidate) => candidate.entityId === entityId);
      if (!entity) continue;
      const until = state.validUntil.get(entityId);
      if (until !== undefined && until <= now) {
        this.options.log?.warn({ entityId, source }, 'SAML: the trusted metadata of this identity provider has expired (validUntil)');
        continue;
      }
      return { entity, incomplete: false };
    }
    return { entity: undefined, incomplete };
  }

  private async refresh(source: string): Promise<void> {
    if (/^https?:\/\//i.test(source)) return this.refreshUrl(source);
    return this.refreshFile(source);
  }

  private async refreshFile(file: string): Promise<void> {
    const state = this.states.get(file);
    // The version of the file last tried (read or not): a broken file is tried (and logged) once per change.
    let version = 'missing';
    try {
      const stat = await fs.stat(file);
      version = `${stat.mtimeMs}:${stat.size}`;
      if (state && state.version === version) return;
      const parsed = parseIdpMetadata(await fs.readFile(file, 'utf8'), file);
      this.states.set(file, { version, entities: parsed.entities, validUntil: parsed.validUntil, failed: false });
    } catch (error) {
      if (state && state.version === version) return;
      this.options.log?.warn({ source: file, cause: (error as Error).message }, 'SAML: trusted identity-provider metadata cannot be read; its last good content is kept');
      if (!state) this.states.set(file, { version, entities: [], validUntil: new Map(), failed: true });
      else state.version = version;
    }
  }

  private async refreshUrl(url: string): Promise<void> {
    const state = this.states.get(url);
    const now = this.options.clock.now();
    if (state?.fetchedAt !== undefined && now - state.fetchedAt < this.options.refreshMs) return;
    try {
      const response = await this.fetch(url, { signal: AbortSignal.timeout(this.options.httpTimeoutMs), redirect: 'error' });
      if (response.status !== 200) throw new MetadataError(`${url} answered ${response.status}`);
      const parsed = parseIdpMetadata(await response.text(), url);
      this.states.set(url, { fetchedAt: now, entities: parsed.entities, validUntil: parsed.validUntil, failed: false });
    } catch (error) {
      this.options.log?.warn({ source: url, cause: (error as Error).message }, 'SAML: trusted identity-provider metadata cannot be fetched; its last good content is kept');
      if (!state) this.states.set(url, { fetchedAt: now, entities: [], validUntil: new Map(), failed: true });
      else state.fetchedAt = now;
    }
  }
}
