import { userPrincipal, type LoginAttempt } from '../../token/login-throttle.ts';
import { auditAuthenticationFailure } from '../../token/authentication-audit.ts';
import { auditInitiator } from '../audit.ts';
import { authorize, caller, defaultDomainOf, extraAttributes, noContent, type App, type IdentityApi } from '../context.ts';
import { collectionLinks } from '../links.ts';
import { sendList } from '../list-stream.ts';
import { listingTarget, userTarget } from '../targets.ts';
import { booleanFilter, matchParameters, querySchema, stringMatches, stringParameter } from '../query.ts';
import { renderGroup, renderProject, renderUser } from '../render.ts';
import { GroupEntity, PasswordChange, ProjectEntity, UserCreate, UserEntity, UserUpdate, many, one, params } from '../schemas.ts';
import { Type, type Static } from 'typebox';
import { ValidationError } from '../../support/errors.ts';

const USER_FIELDS = ['id', 'name', 'domain_id', 'password', 'enabled', 'default_project_id', 'options', 'links', 'extra', 'password_expires_at'] as const;
const Params = params('user_id');
const UserList = many('users', UserEntity);

/** GET /v3/users and /v3/users/{id}/projects: name filters, enabled, domain_id. */
const UserListQuery = querySchema(...matchParameters('name'), 'enabled', 'domain_id');
const NameQuery = querySchema(...matchParameters('name'));

function listFilter(query: Static<typeof UserListQuery>) {
  const enabled = booleanFilter(query.enabled);
  const domainId = stringParameter(query.domain_id);
  return { name: stringMatches(query, 'name'), ...(enabled === undefined ? {} : { enabled }), ...(domainId === undefined ? {} : { domainId }) };
}

export function registerUserRoutes(app: App, api: IdentityApi): void {
  // The whole list, as Keystone; read and written LIST_PAGE_SIZE users at a time (list-stream.ts).
  app.get('/v3/users', { schema: { querystring: UserListQuery, response: { 200: UserList } } }, async (request, reply) => {
    const auth = authorize(api, request, 'identity:list_users', listingTarget(request));
    const filter = listFilter(request.query);
    // A domain-scoped caller only sees its own domain's users.
    const pages = api.identity.listUserPages(auth.scope.type === 'domain' ? { ...filter, domainId: auth.scope.domain.id } : filter, api.config.listPageSize);
    return sendList(request, reply, 'users', UserList, pages, (users) => users.map((user) => renderUser(request, user)));
  });

  app.post('/v3/users', { schema: { body: UserCreate, response: { 201: one('user', UserEntity) } } }, async (request, reply) => {
    const body = request.body.user;
    const auth = authorize(api, request, 'identity:create_user', { user: { domainId: body.domain_id ?? defaultDomainOf(caller(request)) } });
    const user = await api.identity.createUser({
      name: body.name,
      domainId: body.domain_id ?? defaultDomainOf(auth),
      password: body.password,
      enabled: body.enabled,
      defaultProjectId: body.default_project_id,
      options: body.options,
      extra: extraAttributes(body, USER_FIELDS),
    });
    reply.code(201);
    return { user: renderUser(request, user) };
  });

  app.get('/v3/users/:user_id', { schema: { params: Params, response: { 200: one('user', UserEntity) } } }, async (request) => {
    authorize(api, request, 'identity:get_user', { user: await userTarget(api, request.params.user_id) });
    return { user: renderUser(request, await api.identity.getUser(request.params.user_id)) };
  });

  app.patch('/v3/users/:user_id', { schema: { params: Params, body: UserUpdate, response: { 200: one('user', UserEntity) } } }, async (request) => {
    authorize(api, request, 'identity:update_user', { user: await userTarget(api, request.params.user_id) });
    const body = request.body.user;
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
    // Keystone's update response (only) also carries the raw extra attributes.
    return { user: { ...renderUser(request, user), extra: user.extra } };
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
      authorize(api, request, 'identity:list_groups_for_user', { user: await userTarget(api, request.params.user_id) });
      await api.identity.getUser(request.params.user_id);
      const groups = await api.identity.listGroups({ userId: request.params.user_id, name: stringMatches(request.query, 'name') });
      return {
        groups: groups.map((group) => ({ ...renderGroup(request, group), membership_expires_at: null })),
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
