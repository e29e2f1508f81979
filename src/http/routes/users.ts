import { userPrincipal, type LoginAttempt } from '../../token/login-throttle.ts';
import { auditAuthenticationFailure } from '../../token/authentication-audit.ts';
import { auditInitiator } from '../audit.ts';
import { authorize, caller, defaultDomainOf, extraAttributes, noContent, type App, type IdentityApi } from '../context.ts';
import { sentField } from '../decision-order.ts';
import { collectionLinks } from '../links.ts';
import { sendList } from '../list-stream.ts';
import { listingTarget, userTarget } from '../targets.ts';
import { booleanFilter, matchParameters, querySchema, stringMatches, stringParameter } from '../query.ts';
import { renderGroup, renderProject, renderUser } from '../render.ts';
import { GroupEntity, PasswordChange, ProjectEntity, UserCreate, UserEntity, UserUpdate, many, one, params } from '../schemas.ts';
import { Type, type Static } from 'typebox';
import { ValidationError } from '../../support/errors.ts';

const USER_FIELDS = ['id', 'name', 'domain_id', 'password', 'enabled', 'default_project_id', 'options', 'links', 'extra', 'password_expires_at', 'federated'] as const;
const Params = params('user_id');
const UserList = many('users', UserEntity);

/** GET /v3/users and /v3/users/{id}/projects: name filters, enabled, domain_id. */
const UserListQuery = querySchema(...matchParameters('name'), 'enabled', 'domain_id');
/** GET /v3/users also filters on federated identities (Keystone's idp_id, protocol_id, unique_id). */
const UsersQuery = querySchema(...matchParameters('name'), 'enabled', 'domain_id', 'idp_id', 'protocol_id', 'unique_id');
const NameQuery = querySchema(...matchParameters('name'));

function listFilter(query: Static<typeof UserListQuery>) {
  const enabled = booleanFilter(query.enabled);
  const domainId = stringParameter(query.domain_id);
  return { name: stringMatches(query, 'name'), ...(enabled === undefined ? {} : { enabled }), ...(domainId === undefined ? {} : { domainId }) };
}

export function registerUserRoutes(app: App, api: IdentityApi): void {
  // The whole list, as Keystone; read and written LIST_PAGE_SIZE users at a time (list-stream.ts).
  app.get('/v3/users', { schema: { querystring: UsersQuery, response: { 200: UserList } } }, async (request, reply) => {
    const auth = authorize(api, request, 'identity:list_users', listingTarget(request));
    let filter: ReturnType<typeof listFilter> & { ids?: string[] } = listFilter(request.query);
    // Keystone's _handle_shadow_and_local_users: a federated filter lists only the users with a
    // matching federated identity (the other filters still apply).
    const federated = federatedFilter(request.query);
    if (federated) {
      const ids = await api.federation.federatedUserIds(federated);
      if (ids.length === 0) return { users: [], links: collectionLinks(request) };
      filter = { ...filter, ids };
    }
    // A domain-scoped caller only sees its own domain's users.
    const pages = api.identity.listUserPages(auth.scope.type === 'domain' ? { ...filter, domainId: auth.scope.domain.id } : filter, api.config.listPageSize);
    return sendList(request, reply, 'users', UserList, pages, (users) => users.map((user) => renderUser(request, user)));
  });

  app.post('/v3/users', { schema: { body: UserCreate, response: { 201: one('user', UserEntity) } } }, async (request, reply) => {
    const auth = authorize(api, request, 'identity:create_user', { user: { domainId: sentField(request, 'user', 'domain_id') ?? defaultDomainOf(caller(request)) } });
    const body = request.body.user;
    if (body.federated?.length) await api.federation.validateFederatedObjects(body.federated);
    const user = await api.identity.createUser({
      name: body.name,
      domainId: body.domain_id ?? defaultDomainOf(auth),
      password: body.password,
      enabled: body.enabled,
      defaultProjectId: body.default_project_id,
      options: body.options,
      extra: extraAttributes(body, USER_FIELDS),
    });
    // Keystone's _create_user_with_federated_objects: checked before the user is made, written
    // after it, and answered as sent; an empty list is none.
    if (body.federated?.length) await api.federation.replaceFederatedObjects(user.id, user.name, body.federated);
    reply.code(201);
    return { user: withFederated(renderUser(request, user), body.federated?.length ? body.federated : undefined) };
  });

  app.get('/v3/users/:user_id', { schema: { params: Params, response: { 200: one('user', UserEntity) } } }, async (request) => {
    authorize(api, request, 'identity:get_user', { user: await userTarget(api, request.params.user_id) });
    const user = await api.identity.getUser(request.params.user_id);
    return { user: withFederated(renderUser(request, user), await api.federation.federatedObjectsOf(user.id)) };
  });

  app.patch('/v3/users/:user_id', { schema: { params: Params, body: UserUpdate, response: { 200: one('user', UserEntity) } } }, async (request) => {
    authorize(api, request, 'identity:update_user', { user: await userTarget(api, request.params.user_id) });
    const body = request.body.user;
    // Keystone's _update_user_with_federated_objects: a non-empty list replaces the user's (checked
    // first); an empty one changes nothing.
    const federated = body.federated?.length ? body.federated : undefined;
    if (federated) await api.federation.validateFederatedObjects(federated);
    const user = await api.identity.updateUser(request.params.user_id, {
      id: typeof body.id === 'string' ? body.id : undefined,
      name: body.name,
      domainId: body.domain_id,
      password: body.password,
      enabled: body.enabled,
      defaultProjectId: body.default_project_id,
      options: body.options,
      extra: extraAttributes(body, USER_FIELDS),
    });
    if (federated) await api.federation.replaceFederatedObjects(user.id, user.name, federated);
    // Keystone's update response (only) also carries the raw extra attributes.
    return { user: withFederated({ ...renderUser(request, user), extra: user.extra }, federated ?? (await api.federation.federatedObjectsOf(user.id))) };
  });
  app.delete('/v3/users/:user_id', { schema: { params: Params } }, async (request, reply) => {
    authorize(api, request, 'identity:delete_user', { user: await userTarget(api, request.params.user_id) });
    await api.identity.deleteUser(request.params.user_id);
    return noContent(reply);
  });

  app.post('/v3/users/:user_id/password', { config: { public: true }, schema: { params: Params, body: PasswordChange } }, async (request, reply) => {
    const { original_password, password } = request.body.user;
    const userId = request.params.user_id;
    // The original password is guessable here as on POST /v3/auth/tokens: the same limits apply.
    const initiator = { ...auditInitiator(api, request, reply), userId };
    let attempt: LoginAttempt | undefined;
    try {
      attempt = await api.loginThrottle.begin(initiator.address, userPrincipal(userId));
      await api.identity.changePassword(userId, original_password, password);
    } catch (error) {
      // A password-policy refusal comes after the original password was proven right.
      if (!(error instanceof ValidationError)) {
        auditAuthenticationFailure(api.audit, initiator, error);
        throw error;
      }
      await attempt?.succeeded();
      api.audit.authenticate('success', initiator);
      throw error;
    }
    await attempt.succeeded();
    api.audit.authenticate('success', initiator);
    return noContent(reply);
  });

  app.get(
    '/v3/users/:user_id/groups',
    {
      schema: {
        params: Params,
        querystring: NameQuery,
        response: { 200: many('groups', Type.Intersect([GroupEntity, Type.Object({ membership_expires_at: Type.Null() })])) },
      },
    },
    async (request) => {
      const auth = authorize(api, request, 'identity:list_groups_for_user', { user: await userTarget(api, request.params.user_id) });
      await api.identity.getUser(request.params.user_id);
      const groups = await api.identity.listGroups({ userId: request.params.user_id, name: stringMatches(request.query, 'name') });
      // A domain-scoped caller sees the user's groups of its own domain only, as in Keystone.
      const scope = auth.scope;
      const visible = scope.type === 'domain' ? groups.filter((group) => group.domainId === scope.domain.id) : groups;
      return {
        groups: visible.map((group) => ({ ...renderGroup(request, group), membership_expires_at: null })),
        links: collectionLinks(request),
      };
    },
  );

  app.get(
    '/v3/users/:user_id/projects',
    { schema: { params: Params, querystring: UserListQuery, response: { 200: many('projects', ProjectEntity) } } },
    async (request) => {
      authorize(api, request, 'identity:list_user_projects', { user: await userTarget(api, request.params.user_id) });
      await api.identity.getUser(request.params.user_id);
      const filter = listFilter(request.query);
      const ids = await api.assignments.targetsOfUser(request.params.user_id, 'project');
      const projects = ids.length ? await api.resources.listProjects({ ids, ...filter }) : [];
      return { projects: projects.map((project) => renderProject(request, project)), links: collectionLinks(request) };
    },
  );
}

/** The federated filters of GET /v3/users, when any is given (a repeated one: its last value, as the others). */
function federatedFilter(query: Static<typeof UsersQuery>): { idpId?: string; protocolId?: string; uniqueId?: string } | undefined {
  const idpId = stringParameter(query.idp_id);
  const protocolId = stringParameter(query.protocol_id);
  const uniqueId = stringParameter(query.unique_id);
  if (idpId === undefined && protocolId === undefined && uniqueId === undefined) return undefined;
  return { ...(idpId === undefined ? {} : { idpId }), ...(protocolId === undefined ? {} : { protocolId }), ...(uniqueId === undefined ? {} : { uniqueId }) };
}

/** A user body with its federated objects (Keystone shows the key only when there are some), before its links. */
function withFederated<T extends { links: unknown }>(user: T, federated: readonly unknown[] | undefined): T & { federated?: unknown[] } {
  if (!federated?.length) return user;
  const { links, ...rest } = user;
  return { ...rest, federated: [...federated], links } as T & { federated?: unknown[] };
}
