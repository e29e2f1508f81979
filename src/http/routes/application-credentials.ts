import type { FastifyRequest } from 'fastify';
import { ForbiddenError, NotFoundError, ValidationError } from '../../support/errors.ts';
import { isDelegated } from '../../token/delegation.ts';
import type { TokenContext } from '../../token/token-service.ts';
import type { AccessRule, ApplicationCredential } from '../../identity/application-credential-service.ts';
import { authorize, noContent, type App, type IdentityApi } from '../context.ts';
import { collectionLinks, selfLink } from '../links.ts';
import { querySchema, stringParameter } from '../query.ts';
import { renderRole } from '../render.ts';
import { naiveMicrosecondTime, parseExpirationDate, type MicrosecondTime } from '../../support/timestamps.ts';
import { AccessRuleEntity, ApplicationCredentialCreate, ApplicationCredentialEntity, many, one, params } from '../schemas.ts';

const UserParams = params('user_id');
const CredentialParams = params('user_id', 'application_credential_id');
const RuleParams = params('user_id', 'access_rule_id');
const CredentialListQuery = querySchema('name');
const AccessRuleListQuery = querySchema('service', 'path', 'method');

function renderAccessRule(request: FastifyRequest, rule: AccessRule) {
  return { id: rule.id, service: rule.service, path: rule.path, method: rule.method, links: selfLink(request, 'access_rules', rule.id) };
}

function renderCredential(request: FastifyRequest, credential: ApplicationCredential) {
  return {
    id: credential.id,
    name: credential.name,
    description: credential.description,
    user_id: credential.userId,
    project_id: credential.projectId,
    system: null,
    expires_at: credential.expiresAt && naiveMicrosecondTime(credential.expiresAt, credential.expiresAtMicroseconds),
    unrestricted: credential.unrestricted,
    roles: credential.roles.map((role) => renderRole(request, role)),
    ...(credential.accessRules.length
      ? { access_rules: credential.accessRules.map((rule) => ({ id: rule.id, service: rule.service, path: rule.path, method: rule.method })) }
      : {}),
    // Keystone 22 links here (a path it does not route); kept for byte compatibility.
    links: selfLink(request, 'application_credentials', credential.id),
  };
}

/**
 * Keystone refuses a trust's, an OAuth1 token's or an EC2 signature's token any application
 * credential or access rule (one made from them would outlive the delegation and leave its audit
 * chain); an application credential's own token is judged by the service (restricted or not).
 */
function refuseDelegated(auth: TokenContext): void {
  if (auth.applicationCredential) return;
  if (isDelegated(auth)) throw new ForbiddenError(ForbiddenError.NOT_AUTHORIZED);
}

/** /v3/users/{user_id}/application_credentials and /access_rules. */
export function registerApplicationCredentialRoutes(app: App, api: IdentityApi): void {
  app.post(
    '/v3/users/:user_id/application_credentials',
    { schema: { params: UserParams, body: ApplicationCredentialCreate, response: { 201: one('application_credential', ApplicationCredentialEntity) } } },
    async (request, reply) => {
      const auth = authorize(api, request, 'identity:create_application_credential', { user: { id: request.params.user_id } });
      refuseDelegated(auth);
      const body = request.body.application_credential;
      let expiresAt: MicrosecondTime | null | undefined;
      if (typeof body.expires_at === 'string') {
        expiresAt = parseExpirationDate(body.expires_at);
        if (!expiresAt) throw ValidationError.timestampFormat();
      } else {
        expiresAt = body.expires_at;
      }
      const { credential, secret } = await api.applicationCredentials.create(
        request.params.user_id,
        {
          userId: auth.user.id,
          projectId: auth.scope.type === 'project' ? auth.scope.project.id : null,
          roleIds: auth.roles.map((role) => role.id),
          viaApplicationCredential: auth.applicationCredential,
        },
        {
          name: body.name,
          description: body.description,
          secret: body.secret,
          expiresAt,
          roles: body.roles,
          unrestricted: body.unrestricted,
          accessRules: body.access_rules,
        },
      );
      reply.code(201);
      return { application_credential: { ...renderCredential(request, credential), secret } };
    },
  );

  app.get(
    '/v3/users/:user_id/application_credentials',
    { schema: { params: UserParams, querystring: CredentialListQuery, response: { 200: many('application_credentials', ApplicationCredentialEntity) } } },
    async (request) => {
      refuseDelegated(authorize(api, request, 'identity:list_application_credentials', { user: { id: request.params.user_id } }));
      const credentials = await api.applicationCredentials.list(request.params.user_id, stringParameter(request.query.name));
      return { application_credentials: credentials.map((credential) => renderCredential(request, credential)), links: collectionLinks(request) };
    },
  );

  app.get(
    '/v3/users/:user_id/application_credentials/:application_credential_id',
    { schema: { params: CredentialParams, response: { 200: one('application_credential', ApplicationCredentialEntity) } } },
    async (request) => {
      // Keystone decides on the credential's owner, not on the path's user: someone else's credential
      // is 403 under one's own path, and an admin reaches it under any user's path.
      const found = await api.applicationCredentials.lookup(request.params.application_credential_id);
      refuseDelegated(authorize(api, request, 'identity:get_application_credential', { user: { id: found?.userId ?? request.params.user_id } }));
      if (!found) throw NotFoundError.of('Application Credential', request.params.application_credential_id);
      return { application_credential: renderCredential(request, found) };
    },
  );

  app.delete('/v3/users/:user_id/application_credentials/:application_credential_id', { schema: { params: CredentialParams } }, async (request, reply) => {
    // As for reading it: the credential's owner is the policy's user.
    const owner = (await api.applicationCredentials.lookup(request.params.application_credential_id))?.userId ?? request.params.user_id;
    const auth = authorize(api, request, 'identity:delete_application_credential', { user: { id: owner } });
    refuseDelegated(auth);
    await api.applicationCredentials.delete(owner, request.params.application_credential_id, {
      viaApplicationCredential: auth.applicationCredential,
    });
    return noContent(reply);
  });

  app.get(
    '/v3/users/:user_id/access_rules',
    { schema: { params: UserParams, querystring: AccessRuleListQuery, response: { 200: many('access_rules', AccessRuleEntity) } } },
    async (request) => {
      refuseDelegated(authorize(api, request, 'identity:list_access_rules', { user: { id: request.params.user_id } }));
      const filter: { service?: string; path?: string; method?: string } = {};
      for (const name of ['service', 'path', 'method'] as const) {
        const value = stringParameter(request.query[name]);
        if (value !== undefined) filter[name] = value;
      }
      const rules = await api.applicationCredentials.listAccessRules(request.params.user_id, filter);
      return { access_rules: rules.map((rule) => renderAccessRule(request, rule)), links: collectionLinks(request) };
    },
  );

  app.get('/v3/users/:user_id/access_rules/:access_rule_id', { schema: { params: RuleParams, response: { 200: one('access_rule', AccessRuleEntity) } } }, async (request) => {
    refuseDelegated(authorize(api, request, 'identity:get_access_rule', { user: { id: request.params.user_id } }));
    return { access_rule: renderAccessRule(request, await api.applicationCredentials.getAccessRule(request.params.user_id, request.params.access_rule_id)) };
  });

  app.delete('/v3/users/:user_id/access_rules/:access_rule_id', { schema: { params: RuleParams } }, async (request, reply) => {
    refuseDelegated(authorize(api, request, 'identity:delete_access_rule', { user: { id: request.params.user_id } }));
    await api.applicationCredentials.deleteAccessRule(request.params.user_id, request.params.access_rule_id);
    return noContent(reply);
  });
}
