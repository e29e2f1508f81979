import type { FastifyReply, FastifyRequest } from 'fastify';
import { FederatedLogin } from '../../federation/federated-login.ts';
import { auditAuthenticationFailure } from '../../token/authentication-audit.ts';
import { catalogFor } from '../../token/issue-token.ts';
import type { TokenContext } from '../../token/token-service.ts';
import { auditInitiator } from '../audit.ts';
import type { App, IdentityApi } from '../context.ts';
import { renderToken } from '../render.ts';
import { MOUNT_PREFIX } from '../links.ts';
import { TokenBody, params } from '../schemas.ts';
import { parseCookies } from './websso.ts';

const LOGIN_PATH = '/v3/OS-FEDERATION/identity_providers/:idp_id/protocols/:protocol_id/auth';
const LoginParams = params('idp_id', 'protocol_id');

/**
 * OS-FEDERATION's login (Keystone's OSFederationAuthResource): GET or POST
 * /v3/OS-FEDERATION/identity_providers/{idp_id}/protocols/{protocol_id}/auth. Public, rate-limited
 * per client address like a password login. The request is verified into an assertion by the
 * injected verifiers only (never from headers a client sets: Keystone trusts OIDC-* headers because
 * Apache in front of it sets them; nothing sits in front of this service); the mapped user gets an
 * unscoped federated token: 201, X-Subject-Token, the token body.
 */
export function registerFederationAuthRoutes(app: App, api: IdentityApi): void {
  const handler = async (request: FastifyRequest<{ Params: { idp_id: string; protocol_id: string } }>, reply: FastifyReply) => {
    const initiator = auditInitiator(api, request, reply);
    let token: TokenContext;
    try {
      const attempt = await api.loginThrottle.begin(initiator.address, undefined);
      const { identityProvider, protocol } = await api.federatedLogin.target(request.params.idp_id, request.params.protocol_id);
      const assertion = await FederatedLogin.verify(api.assertionVerifiers, {
        identityProvider,
        protocol,
        headers: request.headers,
        contentType: request.headers['content-type'],
        body: request.body,
        endpointUrl: loginUrl(api, request, identityProvider.id, protocol.id),
        cookies: parseCookies(request.headers.cookie),
      });
      const { user, federation } = await api.federatedLogin.login(identityProvider, protocol, assertion);
      token = await api.tokens.issueFederated({ user, protocolId: protocol.id, ...(federation ? { federation } : {}) });
      await attempt.succeeded();
    } catch (error) {
      auditAuthenticationFailure(api.audit, initiator, error);
      throw error;
    }
    // Keystone's identity.authenticate for a federated login (send_saml_audit_notification).
    api.audit.authenticate('success', { ...initiator, userId: token.user.id, userName: token.user.name });
    // A mapped local user's token may be scoped to its default project: then with its catalog.
    const catalog = await catalogFor(api.clientCatalog, token);
    reply.code(201).header('X-Subject-Token', token.id);
    return { token: renderToken(token, catalog, await api.federation.enabledServiceProviders()) };
  };
  app.get(LOGIN_PATH, { config: { public: true }, schema: { params: LoginParams, response: { 201: TokenBody } } }, handler);
  app.post(LOGIN_PATH, { config: { public: true, rawSamlBody: true }, schema: { params: LoginParams, response: { 201: TokenBody } } }, handler);
}

/**
 * This login's public URL, what a SAML assertion must be addressed to: PUBLIC_URL (or the default
 * base URL) and the mount prefix, never the request's Host header (a client could name another
 * service provider's host and replay an assertion made for it).
 */
function loginUrl(api: IdentityApi, request: FastifyRequest, idpId: string, protocolId: string): string {
  const prefix = (request.raw as { [MOUNT_PREFIX]?: string })[MOUNT_PREFIX] ?? '';
  return `${api.config.publicUrl}${prefix}/v3/OS-FEDERATION/identity_providers/${encodeURIComponent(idpId)}/protocols/${encodeURIComponent(protocolId)}/auth`;
}
