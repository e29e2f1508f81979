import type { FastifyReply, FastifyRequest } from 'fastify';
import { ECP_CONSUMER_PATH, ECP_SESSION_COOKIE } from '../../federation/saml/sp/ecp-session.ts';
import { auditAuthenticationFailure } from '../../token/authentication-audit.ts';
import { auditInitiator } from '../audit.ts';
import type { App, IdentityApi } from '../context.ts';
import { IDENTITY_MOUNT, MOUNT_PREFIX } from '../links.ts';

/**
 * POST /Shibboleth.sso/SAML2/ECP: Shibboleth's ECP assertion consumer, where Keystone's K2K guide
 * points a service provider's sp_url (ecp-session.ts). Public, rate-limited per client address as
 * a login. The posted response (an ECP envelope, a bare Response, or the HTTP-POST form) must be
 * addressed to this URL; the answer is a redirect with the session cookie, to the login URL when
 * exactly one login can take the issuer (else to the service's root, Shibboleth's home URL).
 * Failures are Keystone-shaped JSON errors (401; 503 while trusted metadata cannot be read).
 */
export function registerSamlEcpRoutes(app: App, api: IdentityApi): void {
  const root = new URL(api.config.publicUrl).pathname.replace(/\/$/, '');
  const cookiePaths = [root, `${root}${IDENTITY_MOUNT}`].map((mount) => `${mount}/v3/OS-FEDERATION/identity_providers/`);
  const cookieFlags = ['HttpOnly', 'SameSite=Strict', ...(api.config.publicUrl.startsWith('https:') ? ['Secure'] : [])];
  app.post(ECP_CONSUMER_PATH, { config: { public: true, rawSamlBody: true } }, async (request: FastifyRequest, reply: FastifyReply) => {
    const initiator = auditInitiator(api, request, reply);
    const base = `${api.config.publicUrl}${(request.raw as { [MOUNT_PREFIX]?: string })[MOUNT_PREFIX] ?? ''}`;
    try {
      const attempt = await api.loginThrottle.begin(initiator.address, undefined);
      const session = await api.samlEcpSessions.consume({ contentType: request.headers['content-type'], body: request.body, endpointUrl: `${base}${ECP_CONSUMER_PATH}` });
      await attempt.succeeded();
      const next = session.login
        ? `${base}/v3/OS-FEDERATION/identity_providers/${encodeURIComponent(session.login.idpId)}/protocols/${encodeURIComponent(session.login.protocolId)}/auth`
        : `${base}/`;
      // Sent back only to the login URLs, never readable by scripts (no browser runs ECP), and never
      // to the services behind the gateway. Both mounts: Shibboleth's URL is at the host's root
      // wherever the client's auth_url is (devstack's is under /identity), and keystoneauth calls its
      // own login URL, not the Location.
      const cookies = cookiePaths.map((path) => [`${ECP_SESSION_COOKIE}=${session.cookieValue}`, `Max-Age=${session.maxAgeSeconds}`, `Path=${path}`, ...cookieFlags].join('; '));
      return reply.code(302).header('Location', next).header('Set-Cookie', cookies).header('Cache-Control', 'no-store').send();
    } catch (error) {
      auditAuthenticationFailure(api.audit, initiator, error);
      throw error;
    }
  });
}
