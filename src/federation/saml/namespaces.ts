// The SAML 2.0, XML-DSig and SOAP namespaces and constants Keystone's assertions and metadata use.

export const NS = {
  protocol: 'urn:oasis:names:tc:SAML:2.0:protocol',
  assertion: 'urn:oasis:names:tc:SAML:2.0:assertion',
  metadata: 'urn:oasis:names:tc:SAML:2.0:metadata',
  xmldsig: 'http://www.w3.org/2000/09/xmldsig#',
  xsi: 'http://www.w3.org/2001/XMLSchema-instance',
  xs: 'http://www.w3.org/2001/XMLSchema',
  soap: 'http://schemas.xmlsoap.org/soap/envelope/',
  ecp: 'urn:oasis:names:tc:SAML:2.0:profiles:SSO:ecp',
} as const;

export const NAMEID_FORMAT_ENTITY = 'urn:oasis:names:tc:SAML:2.0:nameid-format:entity';
export const NAMEID_FORMAT_TRANSIENT = 'urn:oasis:names:tc:SAML:2.0:nameid-format:transient';
export const STATUS_SUCCESS = 'urn:oasis:names:tc:SAML:2.0:status:Success';
export const SCM_BEARER = 'urn:oasis:names:tc:SAML:2.0:cm:bearer';
export const AUTHN_PASSWORD = 'urn:oasis:names:tc:SAML:2.0:ac:classes:Password';
export const ATTRNAME_FORMAT_URI = 'urn:oasis:names:tc:SAML:2.0:attrname-format:uri';
export const BINDING_URI = 'urn:oasis:names:tc:SAML:2.0:bindings:URI';
/** pysaml2's client_base.ACTOR: the SOAP actor of the ECP RelayState header. */
export const SOAP_ACTOR_NEXT = 'http://schemas.xmlsoap.org/soap/actor/next';
