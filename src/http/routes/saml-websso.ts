import type { FastifyReply, FastifyRequest } from 'fastify';
import { stateCookieNameOfForm, type SamlWebSso } from '../../federation/saml/sp/saml-websso.ts';
import { AuthenticationError } from '../../support/errors.ts';
import type { App, IdentityApi } from '../context.ts';
import { MOUNT_PREFIX } from '../links.ts';
import { params } from '../schemas.ts';
import { completeWebSso, parseCookies } from './websso.ts';

/** The assertion consumer service of a SAML protocol (HTTP-POST binding): the ACS URL to register at the identity provider. */
const ACS_PATH = '/v3/auth/OS-FEDERATION/websso/:protocol_id/acs';
const ProtocolParams = params('protocol_id');

/**
 * This protocol's ACS URL: PUBLIC_URL (and the mount prefix), never the request's Host header, as
 * the SAML login URL (a response must be addressed to it: Destination, Recipient).
 */
export function samlAcsUrl(api: IdentityApi, request: FastifyRequest, protocolId: string): string {
  const prefix = (request.raw as { [MOUNT_PREFIX]?: string })[MOUNT_PREFIX] ?? '';
  return `${api.config.publicUrl}${prefix}/v3/auth/OS-FEDERATION/websso/${encodeURIComponent(protocolId)}/acs`;
}

/**
 * The SAML login-state cookie: sent back only to the ACS path, never readable by scripts. The
 * identity provider's page posts the response cross-site, which a SameSite=Lax cookie would not
 * follow: SameSite=None (with Secure) when the public URL is https; over http (tests, a loopback
 * deployment) no SameSite attribute, which browsers treat as Lax but still send on a top-level
 * POST within two minutes of the cookie being set.
 */
export function samlStateCookie(name: string, value: string, maxAgeSeconds: number, acsUrl: string): string {
  const url = new URL(acsUrl);
  const attributes = [`${name}=${value}`, `Max-Age=${maxAgeSeconds}`, `Path=${url.pathname}`, 'HttpOnly'];
  if (url.protocol === 'https:') attributes.push('SameSite=None', 'Secure');
  return attributes.join('; ');
}

/**
 * POST …/websso/{protocol}/acs: the identity provider's HTTP-POST binding back (a form with
 * SAMLResponse and RelayState). Completes the SAML websso the start URLs (routes/websso.ts) began;
 * answers Keystone's sso_callback page posting the unscoped federated token to the dashboard.
 * Public, rate-limited per client address; failures are Keystone-shaped JSON errors (401, 403 when
 * the provider no longer names the issuer, 503 when trusted metadata cannot be read).
 */
export function registerSamlWebSsoRoutes(app: App, api: IdentityApi, saml: SamlWebSso | undefined): void {
  app.post(ACS_PATH, { config: { public: true, rawSamlBody: true }, schema: { params: ProtocolParams } }, async (request: FastifyRequest<{ Params: { protocol_id: string } }>, reply: FastifyReply) => {
    const acsUrl = samlAcsUrl(api, request, request.params.protocol_id);
    return completeWebSso(api, request, reply, {
      complete: () => {
        if (!saml?.handles(request.params.protocol_id)) throw AuthenticationError.because({ reason: `SAML websso: protocol ${request.params.protocol_id} is not a SAML protocol (SAML_PROTOCOLS)`, code: 401 });
        if (!Buffer.isBuffer(request.body)) throw saml.notAForm();
        return saml.complete(request.params.protocol_id, { body: request.body, cookies: parseCookies(request.headers.cookie), acsUrl });
      },
      stateCookieName: () => stateCookieNameOfForm(request.body),
      clearedStateCookie: (name) => samlStateCookie(name, '', 0, acsUrl),
    });
  });
}
