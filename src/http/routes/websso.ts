import type { FastifyReply, FastifyRequest } from 'fastify';
import { stateCookieNameOf, type OidcWebSso, type WebSsoCompletion } from '../../federation/oidc/websso.ts';
import { auditAuthenticationFailure } from '../../token/authentication-audit.ts';
import type { TokenContext } from '../../token/token-service.ts';
import { auditInitiator } from '../audit.ts';
import type { App, IdentityApi } from '../context.ts';
import { baseUrl } from '../links.ts';
import { querySchema, type QueryValue } from '../query.ts';
import { params } from '../schemas.ts';
import { samlAcsUrl, samlStateCookie } from './saml-websso.ts';

const WEBSSO_PATH = '/v3/auth/OS-FEDERATION/websso/:protocol_id';
const WEBSSO_IDP_PATH = '/v3/auth/OS-FEDERATION/identity_providers/:idp_id/protocols/:protocol_id/websso';
/** Where the provider sends the browser back (the redirect URI to register at the provider, one per protocol). */
const CALLBACK_PATH = '/v3/auth/OS-FEDERATION/websso/:protocol_id/redirect';

const ProtocolParams = params('protocol_id');
const IdpProtocolParams = params('idp_id', 'protocol_id');
const StartQuery = querySchema('origin');
const CallbackQuery = querySchema('code', 'state', 'iss', 'error', 'error_description');

type StartRequest = FastifyRequest<{ Params: { protocol_id: string; idp_id?: string }; Querystring: { origin?: QueryValue } }>;
type CallbackRequest = FastifyRequest<{ Params: { protocol_id: string }; Querystring: Record<string, QueryValue | undefined> }>;

/**
 * Keystone's websso (keystone/api/auth.py AuthFederationWebSSOResource and
 * AuthFederationWebSSOIDPsResource) for OpenID Connect, with this service as the relying party
 * (what mod_auth_openidc does in front of Keystone): GET or POST …/websso/{protocol}?origin=… and
 * …/identity_providers/{idp}/protocols/{protocol}/websso?origin=… check the origin (a trusted
 * dashboard) and send the browser to the provider (302, its login state in a sealed cookie); the
 * provider sends it back to …/websso/{protocol}/redirect, whose answer is Keystone's
 * sso_callback_template: a page that posts the unscoped federated token (field `token`) to the
 * origin. Public and rate-limited per client address like the bearer login; failures are
 * Keystone-shaped JSON errors (400 without origin, 401 otherwise, 503 when the provider does not answer).
 */
export function registerWebSsoRoutes(app: App, api: IdentityApi, websso: OidcWebSso): void {
  const start = async (request: StartRequest, reply: FastifyReply) => {
    const initiator = auditInitiator(api, request, reply);
    try {
      const attempt = await api.loginThrottle.begin(initiator.address, undefined);
      const redirectUri = `${baseUrl(request)}/v3/auth/OS-FEDERATION/websso/${encodeURIComponent(request.params.protocol_id)}/redirect`;
      const target = {
        ...(request.params.idp_id !== undefined ? { idpId: request.params.idp_id } : {}),
        protocolId: request.params.protocol_id,
        origin: firstValue(request.query.origin),
      };
      // A SAML protocol (SAML_PROTOCOLS): the HTTP-Redirect binding to the identity provider, back to its ACS (routes/saml-websso.ts).
      const saml = api.samlWebSso?.handles(request.params.protocol_id) ? api.samlWebSso : undefined;
      const acsUrl = saml ? samlAcsUrl(api, request, request.params.protocol_id) : undefined;
      const started = saml && acsUrl ? await saml.begin({ ...target, acsUrl }) : await websso.begin({ ...target, redirectUri });
      await attempt.succeeded();
      const cookie = acsUrl
        ? samlStateCookie(started.cookie.name, started.cookie.value, started.cookie.maxAgeSeconds, acsUrl)
        : stateCookie(started.cookie.name, started.cookie.value, started.cookie.maxAgeSeconds, redirectUri);
      return reply.code(302).header('location', started.location).header('set-cookie', cookie).header('cache-control', 'no-store').send();
    } catch (error) {
      auditAuthenticationFailure(api.audit, initiator, error);
      throw error;
    }
  };
  for (const path of [WEBSSO_PATH, WEBSSO_IDP_PATH]) {
    const schema = { params: path === WEBSSO_PATH ? ProtocolParams : IdpProtocolParams, querystring: StartQuery };
    app.get(path, { config: { public: true }, schema }, start);
    app.post(path, { config: { public: true }, schema }, start);
  }

  // No HEAD: a HEAD would spend the state and issue a token nobody receives.
  app.get(CALLBACK_PATH, { config: { public: true }, exposeHeadRoute: false, schema: { params: ProtocolParams, querystring: CallbackQuery } }, async (request: CallbackRequest, reply) => {
    const redirectUri = `${baseUrl(request)}/v3/auth/OS-FEDERATION/websso/${encodeURIComponent(request.params.protocol_id)}/redirect`;
    return completeWebSso(api, request, reply, {
      complete: () => {
        const query: Record<string, string> = {};
        // A repeated parameter is no answer a provider gives: it counts as absent (refused).
        for (const [name, value] of Object.entries(request.query)) if (typeof value === 'string') query[name] = value;
        return websso.complete(request.params.protocol_id, { query, cookies: parseCookies(request.headers.cookie) });
      },
      stateCookieName: () => (typeof request.query.state === 'string' ? stateCookieNameOf(request.query.state) : undefined),
      clearedStateCookie: (name) => stateCookie(name, '', 0, redirectUri),
    });
  });
}

/** How one kind of websso reads the provider's answer and names its state cookie. */
export interface WebSsoAnswer {
  /** The provider's answer checked against the login state: whose login, and the dashboard to post to. */
  complete(): Promise<WebSsoCompletion>;
  /** The state cookie this request carried a reference to, if any (cleared when the login fails). */
  stateCookieName(): string | undefined;
  /** A Set-Cookie value that clears the state cookie `name`. */
  clearedStateCookie(name: string): string;
}

/**
 * The end every websso login shares (the OpenID Connect redirect, the SAML ACS): rate-limited per
 * client address, the provider's answer completed, the federated user mapped and an unscoped token
 * issued, audited either way, the state cookie cleared either way; the answer is Keystone's
 * sso_callback page posting the token to the trusted dashboard.
 */
export async function completeWebSso(api: IdentityApi, request: FastifyRequest, reply: FastifyReply, answer: WebSsoAnswer): Promise<FastifyReply> {
  const initiator = auditInitiator(api, request, reply);
  let token: TokenContext;
  let completed: WebSsoCompletion;
  try {
    const attempt = await api.loginThrottle.begin(initiator.address, undefined);
    completed = await answer.complete();
    const { user, federation } = await api.federatedLogin.login(completed.identityProvider, completed.protocol, completed.assertion);
    token = await api.tokens.issueFederated({ user, protocolId: completed.protocol.id, ...(federation ? { federation } : {}) });
    await attempt.succeeded();
  } catch (error) {
    auditAuthenticationFailure(api.audit, initiator, error);
    // The state is used (or was never good): the browser need not keep its cookie.
    const name = answer.stateCookieName();
    if (name) reply.header('set-cookie', answer.clearedStateCookie(name));
    throw error;
  }
  api.audit.authenticate('success', { ...initiator, userId: token.user.id, userName: token.user.name });
  return reply
    .code(200)
    .header('content-type', 'text/html; charset=utf-8')
    .header('cache-control', 'no-store')
    .header('pragma', 'no-cache')
    .header('referrer-policy', 'no-referrer')
    .header('set-cookie', answer.clearedStateCookie(completed.cookieName))
    .send(ssoCallbackPage(completed.origin, token.id));
}

/** Keystone's etc/sso_callback_template.html, its two values HTML-escaped. */
export function ssoCallbackPage(host: string, token: string): string {
  return `<!DOCTYPE html>
<html xmlns="http://www.w3.org/1999/xhtml">
  <head>
    <title>Keystone WebSSO redirect</title>
  </head>
  <body>
     <form id="sso" name="sso" action="${escapeHtml(host)}" method="post">
       Please wait...
       <br/>
       <input type="hidden" name="token" id="token" value="${escapeHtml(token)}"/>
       <noscript>
         <input type="submit" name="submit_no_javascript" id="submit_no_javascript"
            value="If your JavaScript is disabled, please click to continue"/>
       </noscript>
     </form>
     <script type="text/javascript">
       window.onload = function() {
         document.forms['sso'].submit();
       }
     </script>
  </body>
</html>
`;
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"'`]/g, (character) => `&#${character.charCodeAt(0)};`);
}

/** Flask's request.args.get: the first of repeated values. */
function firstValue(value: QueryValue | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/**
 * The login-state cookie: only sent back to the callback path, never readable by scripts, Lax (a
 * top-level GET navigation from the provider carries it), Secure when the public URL is https.
 */
function stateCookie(name: string, value: string, maxAgeSeconds: number, redirectUri: string): string {
  const url = new URL(redirectUri);
  const attributes = [`${name}=${value}`, `Max-Age=${maxAgeSeconds}`, `Path=${url.pathname}`, 'HttpOnly', 'SameSite=Lax'];
  if (url.protocol === 'https:') attributes.push('Secure');
  return attributes.join('; ');
}

/** The Cookie header's pairs (the first of a repeated name, as browsers send the most specific path first). */
export function parseCookies(header: string | undefined): Record<string, string> {
  const cookies: Record<string, string> = Object.create(null) as Record<string, string>;
  if (!header) return cookies;
  for (const raw of header.split(';')) {
    const pair = raw.trim();
    const index = pair.indexOf('=');
    if (index <= 0) continue;
    const name = pair.slice(0, index).trim();
    if (!(name in cookies)) cookies[name] = pair.slice(index + 1).trim();
  }
  return cookies;
}
