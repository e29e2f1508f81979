import { authorize, extraAttributes, noContent, type App, type IdentityApi } from '../context.ts';
import { selfLink, collectionLinks } from '../links.ts';
import { matchParameters, querySchema, stringMatches, stringParameter } from '../query.ts';
import { renderRole, renderRoleReference } from '../render.ts';
import { RoleCreate, RoleEntity, RoleInference, RoleInferenceList, RoleInferences, RoleUpdate, many, one, params } from '../schemas.ts';

const ROLE_FIELDS = ['id', 'name', 'domain_id', 'description', 'options', 'links'] as const;
const Params = params('role_id');
const ImplicationParams = params('prior_role_id', 'implied_role_id');
const PriorRoleParams = params('prior_role_id');
const RoleListQuery = querySchema(...matchParameters('name'), 'domain_id');

export function registerRoleRoutes(app: App, api: IdentityApi): void {
  app.get('/v3/roles', { schema: { querystring: RoleListQuery, response: { 200: many('roles', RoleEntity) } } }, async (request) => {
    authorize(api, request, 'identity:list_roles');
    // Without domain_id only global roles are listed, as in Keystone.
    const roles = await api.assignments.listRoles({ name: stringMatches(request.query, 'name'), domainId: stringParameter(request.query.domain_id) ?? null });
    return { roles: roles.map((role) => renderRole(request, role)), links: collectionLinks(request) };
  });

  app.post('/v3/roles', { schema: { body: RoleCreate, response: { 201: one('role', RoleEntity) } } }, async (request, reply) => {
    authorize(api, request, 'identity:create_role');
    const body = request.body.role;
    const role = await api.assignments.createRole({
      name: body.name,
      domainId: body.domain_id,
      description: body.description,
      options: body.options,
      extra: extraAttributes(body, ROLE_FIELDS),
    });
    reply.code(201);
    return { role: renderRole(request, role) };
  });

  app.get('/v3/roles/:role_id', { schema: { params: Params, response: { 200: one('role', RoleEntity) } } }, async (request) => {
    // Keystone reads the member before its policy: an id that exists nowhere is 404 for any token.
    const role = await api.assignments.getRole(request.params.role_id);
    authorize(api, request, 'identity:get_role');
    return { role: renderRole(request, role) };
  });

  app.patch('/v3/roles/:role_id', { schema: { params: Params, body: RoleUpdate, response: { 200: one('role', RoleEntity) } } }, async (request) => {
    // Keystone reads the member before its policy: an id that exists nowhere is 404 for any token.
    await api.assignments.getRole(request.params.role_id);
    authorize(api, request, 'identity:update_role');
    const body = request.body.role;
    const role = await api.assignments.updateRole(request.params.role_id, {
      id: typeof body.id === 'string' ? body.id : undefined,
      name: body.name,
      domainId: body.domain_id,
      description: body.description,
      options: body.options,
      extra: extraAttributes(body, ROLE_FIELDS),
    });
    return { role: renderRole(request, role) };
  });
  app.delete('/v3/roles/:role_id', { schema: { params: Params } }, async (request, reply) => {
    // Keystone reads the member before its policy: an id that exists nowhere is 404 for any token.
    await api.assignments.getRole(request.params.role_id);
    authorize(api, request, 'identity:delete_role');
    await api.assignments.deleteRole(request.params.role_id);
    return noContent(reply);
  });

  // ---- implied roles -------------------------------------------------------------------------

  const implicationLink = (request: Parameters<typeof selfLink>[0], prior: string, implied: string) => ({
    self: `${selfLink(request, 'roles', prior).self}/implies/${implied}`,
  });

  app.put('/v3/roles/:prior_role_id/implies/:implied_role_id', { schema: { params: ImplicationParams, response: { 201: RoleInference } } },
    async (request, reply) => {
      authorize(api, request, 'identity:create_implied_role');
      const { prior, implied } = await api.assignments.createImplication(request.params.prior_role_id, request.params.implied_role_id);
      reply.code(201);
      return {
        role_inference: { prior_role: renderRoleReference(request, prior), implies: renderRoleReference(request, implied) },
        links: implicationLink(request, prior.id, implied.id),
      };
    },
  );

  app.get('/v3/roles/:prior_role_id/implies/:implied_role_id', { schema: { params: ImplicationParams, response: { 200: RoleInference } } },
    async (request, reply) => {
      authorize(api, request, 'identity:get_implied_role');
      const { prior, implied } = await api.assignments.getImplication(request.params.prior_role_id, request.params.implied_role_id);
      // HEAD answers 204 without a body, as Keystone does.
      if (request.method === 'HEAD') return noContent(reply);
      return {
        role_inference: { prior_role: renderRoleReference(request, prior), implies: renderRoleReference(request, implied) },
        links: implicationLink(request, prior.id, implied.id),
      };
    },
  );

  app.delete('/v3/roles/:prior_role_id/implies/:implied_role_id', { schema: { params: ImplicationParams } }, async (request, reply) => {
    authorize(api, request, 'identity:delete_implied_role');
    await api.assignments.deleteImplication(request.params.prior_role_id, request.params.implied_role_id);
    return noContent(reply);
  });

  app.get(
    '/v3/roles/:prior_role_id/implies',
    { schema: { params: PriorRoleParams, response: { 200: RoleInferenceList } } },
    async (request) => {
      authorize(api, request, 'identity:list_implied_roles');
      const [entry] = await api.assignments.listImplications(request.params.prior_role_id);
      return {
        role_inference: {
          prior_role: renderRoleReference(request, entry!.prior),
          implies: entry!.implied.map((role) => renderRoleReference(request, role)),
        },
        links: { self: `${selfLink(request, 'roles', entry!.prior.id).self}/implies` },
      };
    },
  );

  app.get('/v3/role_inferences', { schema: { response: { 200: RoleInferences } } }, async (request) => {
    authorize(api, request, 'identity:list_role_inference_rules');
    const entries = await api.assignments.listImplications();
    return {
      role_inferences: entries.map((entry) => ({
        prior_role: renderRoleReference(request, entry.prior),
        implies: entry.implied.map((role) => renderRoleReference(request, role)),
      })),
    };
  });
}
