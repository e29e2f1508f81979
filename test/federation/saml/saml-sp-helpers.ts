// Identity providers for the service-provider tests: the real Keystone 22 samples (../shared/peers/k2k)
// and identity providers of our own making (this service's K2K signer with a fresh key pair), with
// the metadata a service provider trusts.
import fs from 'node:fs';
import path from 'node:path';
import { SignedXml } from 'xml-crypto';
import { signedEcpEnvelope, signedResponse, type AssertionRequest } from '../../../src/federation/saml/assertion.ts';
import { idpMetadata } from '../../../src/federation/saml/metadata.ts';
import { loadSigningKeys, type SamlSigningKeys } from '../../../src/federation/saml/signing-keys.ts';
import { loadConfig } from '../../../src/config.ts';
import type { TestApp } from '../../helpers/app.ts';
import { K2K_SAMPLES, makeKeyPair } from './saml-test-helpers.ts';

/** The samples' identity provider, service provider URL and times. */
export const SAMPLE = {
  issuer: 'http://127.0.0.1:15050/v3/OS-FEDERATION/saml2/idp',
  recipient: 'http://127.0.0.1:15060/Shibboleth.sso/SAML2/ECP',
  metadataFile: path.join(K2K_SAMPLES, 'k2k-idp-metadata.xml'),
  response: () => fs.readFileSync(path.join(K2K_SAMPLES, 'k2k-saml2-response.xml'), 'utf8'),
  ecp: () => fs.readFileSync(path.join(K2K_SAMPLES, 'k2k-saml2-ecp-envelope.xml'), 'utf8'),
  /** Between the samples' IssueInstant (11:57:08) and NotOnOrAfter (12:57:08). */
  now: Date.UTC(2026, 10, 22, 12, 0, 0),
  notOnOrAfter: Date.UTC(2026, 10, 22, 12, 57, 8),
} as const;

export interface TestIdp {
  entityId: string;
  keys: SamlSigningKeys;
  certFile: string;
  metadataFile: string;
  /** A signed Response (the Assertion signed, as Keystone does) for `recipient`. */
  response(overrides?: Partial<AssertionRequest>): string;
  ecp(overrides?: Partial<AssertionRequest>): string;
}

let counter = 0;

/** An identity provider of our own (K2K signer), its metadata in a file. */
export function makeIdp(t: { teardown(fn: () => unknown): void }, entityId: string, defaults: { recipient: string; now: () => number }): TestIdp {
  const pair = makeKeyPair(t);
  const keys = loadSigningKeys(pair.certFile, pair.keyFile);
  const metadataFile = path.join(pair.dir, 'idp-metadata.xml');
  const settings = loadConfig({ SAML_IDP_ENTITY_ID: entityId, SAML_IDP_SSO_ENDPOINT: `${entityId}/sso` }).saml;
  fs.writeFileSync(metadataFile, idpMetadata(settings, keys.certificateBase64));
  const request = (overrides: Partial<AssertionRequest> = {}): AssertionRequest => {
    counter += 1;
    return {
      issuer: entityId,
      recipient: defaults.recipient,
      claims: { user: 'alice', userDomain: 'Default', roles: ['reader', 'member'], project: 'demo', projectDomain: 'Default', groups: [] },
      now: defaults.now(),
      expiresIn: 3600,
      ids: { response: `r${counter}${Date.now()}`, assertion: `a${counter}${Date.now()}`, session: `s${counter}` },
      ...overrides,
    };
  };
  return {
    entityId,
    keys,
    certFile: pair.certFile,
    metadataFile,
    response: (overrides) => signedResponse(request(overrides), keys, 'rsa-sha256'),
    ecp: (overrides) => signedEcpEnvelope(request(overrides), 'ss:mem:relay', keys, 'rsa-sha256'),
  };
}

/** Signs `element` (found by `id`) of `xml` with `keys`, the certificate in KeyInfo, the Signature first child. */
export function signElement(xml: string, id: string, keys: SamlSigningKeys, location: 'after-issuer' | 'prepend' = 'after-issuer'): string {
  const signer = new SignedXml({
    privateKey: keys.privateKeyPem,
    publicCert: keys.certificate.toString(),
    signatureAlgorithm: 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha256',
    canonicalizationAlgorithm: 'http://www.w3.org/2001/10/xml-exc-c14n#',
  });
  const xpath = `//*[@ID='${id}']`;
  signer.addReference({ xpath, transforms: ['http://www.w3.org/2000/09/xmldsig#enveloped-signature', 'http://www.w3.org/2001/10/xml-exc-c14n#'], digestAlgorithm: 'http://www.w3.org/2001/04/xmlenc#sha256' });
  signer.computeSignature(xml, {
    prefix: 'ds',
    location: location === 'prepend' ? { reference: xpath, action: 'prepend' } : { reference: `${xpath}/*[local-name()='Issuer']`, action: 'after' },
  });
  return signer.getSignedXml();
}

/** Removes every ds:Signature element (whatever its prefix). */
export function stripSignatures(xml: string): string {
  return xml.replace(/<(\w+:)?Signature[\s>][\s\S]*?<\/\1?Signature>/g, '');
}

/** Keystone's K2K mapping (its federation guide): the user by name, the federated_users group of `domainId`. */
export const K2K_RULES = (domainId: string) => [
  {
    local: [{ user: { name: '{0}' } }, { group: { name: 'federated_users', domain: { id: domainId } } }],
    remote: [{ type: 'openstack_user' }, { type: 'openstack_user_domain', any_one_of: ['Default'] }],
  },
];

/**
 * Keystone's K2K setup at a service provider, through the API: a domain `<prefix>-users` whose
 * federated_users group has the member role on project `<prefix>-project`; the identity provider
 * `idpId` in that domain naming `remoteIds`; mapping `<prefix>-mapping` (K2K_RULES) as its saml2 protocol.
 */
export async function setUpK2kProvider(app: TestApp, options: { prefix: string; idpId: string; remoteIds: string[] }): Promise<{ domainId: string; projectId: string }> {
  const created = async (method: 'POST' | 'PUT', url: string, body: unknown) => {
    const response = await app.call(method, url, body);
    if (response.statusCode !== 201) throw new Error(`${method} ${url}: ${response.statusCode} ${response.body}`);
    return response.json();
  };
  const FED = '/v3/OS-FEDERATION';
  const domainId = (await created('POST', '/v3/domains', { domain: { name: `${options.prefix}-users` } })).domain.id as string;
  const groupId = (await created('POST', '/v3/groups', { group: { name: 'federated_users', domain_id: domainId } })).group.id as string;
  const projectId = (await created('POST', '/v3/projects', { project: { name: `${options.prefix}-project`, domain_id: domainId } })).project.id as string;
  const roleId = ((await app.call('GET', '/v3/roles?name=member')).json().roles[0]?.id as string | undefined) ?? (await created('POST', '/v3/roles', { role: { name: 'member' } })).role.id;
  const granted = await app.call('PUT', `/v3/projects/${projectId}/groups/${groupId}/roles/${roleId}`);
  if (granted.statusCode !== 204) throw new Error(`grant: ${granted.statusCode} ${granted.body}`);
  await created('PUT', `${FED}/identity_providers/${options.idpId}`, { identity_provider: { remote_ids: options.remoteIds, enabled: true, domain_id: domainId } });
  await created('PUT', `${FED}/mappings/${options.prefix}-mapping`, { mapping: { rules: K2K_RULES(domainId) } });
  await created('PUT', `${FED}/identity_providers/${options.idpId}/protocols/saml2`, { protocol: { mapping_id: `${options.prefix}-mapping` } });
  return { domainId, projectId };
}
