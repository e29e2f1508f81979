// Keystone's IdP metadata (keystone/federation/idp.py MetadataGenerator, printed by
// `keystone-manage saml_idp_metadata`): an EntityDescriptor with one IDPSSODescriptor, written as
// pysaml2 serialises it (ns0: metadata, ns1: xmldsig).

import type { SamlIdpConfig } from '../../config.ts';
import { BINDING_URI, NAMEID_FORMAT_TRANSIENT, NS } from './namespaces.ts';
import { attribute as a, text as t } from './xml.ts';

export type MetadataSettings = Pick<
  SamlIdpConfig,
  | 'entityId'
  | 'ssoEndpoint'
  | 'lang'
  | 'organizationName'
  | 'organizationDisplayName'
  | 'organizationUrl'
  | 'contactCompany'
  | 'contactName'
  | 'contactSurname'
  | 'contactEmail'
  | 'contactTelephone'
  | 'contactType'
>;

/** Keystone's ValidationError texts when a required option is unset. */
export class MetadataSettingsError extends Error {
  override name = 'MetadataSettingsError';
}

export function idpMetadata(settings: MetadataSettings, certificateBase64: string): string {
  if (!settings.entityId) throw new MetadataSettingsError('Ensure configuration option idp_entity_id is set.');
  if (!settings.ssoEndpoint) throw new MetadataSettingsError('Ensure configuration option idp_sso_endpoint is set.');
  const lang = a(settings.lang);
  return (
    `<ns0:EntityDescriptor xmlns:ns0="${NS.metadata}" xmlns:ns1="${NS.xmldsig}" entityID="${a(settings.entityId)}">` +
    `<ns0:IDPSSODescriptor protocolSupportEnumeration="${NS.protocol}">` +
    `<ns0:KeyDescriptor use="signing"><ns1:KeyInfo><ns1:X509Data><ns1:X509Certificate>${t(certificateBase64)}</ns1:X509Certificate></ns1:X509Data></ns1:KeyInfo></ns0:KeyDescriptor>` +
    `<ns0:Organization>` +
    `<ns0:OrganizationName xml:lang="${lang}">${t(settings.organizationName)}</ns0:OrganizationName>` +
    `<ns0:OrganizationDisplayName xml:lang="${lang}">${t(settings.organizationDisplayName)}</ns0:OrganizationDisplayName>` +
    `<ns0:OrganizationURL xml:lang="${lang}">${t(settings.organizationUrl)}</ns0:OrganizationURL>` +
    `</ns0:Organization>` +
    `<ns0:ContactPerson contactType="${a(settings.contactType)}">` +
    `<ns0:Company>${t(settings.contactCompany)}</ns0:Company>` +
    `<ns0:GivenName>${t(settings.contactName)}</ns0:GivenName>` +
    `<ns0:SurName>${t(settings.contactSurname)}</ns0:SurName>` +
    `<ns0:EmailAddress>${t(settings.contactEmail)}</ns0:EmailAddress>` +
    `<ns0:TelephoneNumber>${t(settings.contactTelephone)}</ns0:TelephoneNumber>` +
    `</ns0:ContactPerson>` +
    `<ns0:NameIDFormat>${NAMEID_FORMAT_TRANSIENT}</ns0:NameIDFormat>` +
    `<ns0:SingleSignOnService Binding="${BINDING_URI}" Location="${a(settings.ssoEndpoint)}" />` +
    `</ns0:IDPSSODescriptor></ns0:EntityDescriptor>`
  );
}
