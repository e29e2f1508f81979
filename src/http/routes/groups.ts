import { authorize, caller, defaultDomainOf, extraAttributes, noContent, type App, type IdentityApi } from '../context.ts';
import { sentField } from '../decision-order.ts';
import { collectionLinks } from '../links.ts';
import { sendList } from '../list-stream.ts';
import { groupTarget, listingTarget, userTarget } from '../targets.ts';
import type { IdentityTarget } from '../../policy/identity-policy.ts';
import { booleanFilter, matchParameters, querySchema, stringMatches, stringParameter } from '../query.ts';
import { renderGroup, renderUser } from '../render.ts';
import { GroupCreate, GroupEntity, GroupUpdate, UserEntity, many, one, params } from '../schemas.ts';

const GROUP_FIELDS = ['id', 'name', 'domain_id', 'description', 'links'] as const;
const Params = params('group_id');
const MemberParams = params('group_id', 'user_id');
const MemberList = many('users', UserEntity);
const GroupListQuery = querySchema(...matchParameters('name'), 'domain_id');
const MemberListQuery = querySchema(...matchParameters('name'), 'enabled', 'domain_id');

async function memberTarget(api: IdentityApi, params: { group_id: string; user_id: string }): Promise<IdentityTarget> {
  const [group, user] = await Promise.all([groupTarget(api, params.group_id), userTarget(api, params.user_id)]);
  return { group, user };
}

export function registerGroupRoutes(app: App, api: IdentityApi): void {
  app.get('/v3/groups', { schema: { querystring: GroupListQuery, response: { 200: many('groups', GroupEntity) } } }, async (request) => {
    const auth = authorize(api, request, 'identity:list_groups', listingTarget(request));
    const domainId = auth.scope.type === 'domain' ? auth.scope.domain.id : stringParameter(request.query.domain_id);
    const groups = await api.identity.listGroups({ name: stringMatches(request.query, 'name'), ...(domainId === undefined ? {} : { domainId }) });
    return { groups: groups.map((group) => renderGroup(request, group)), links: collectionLinks(request) };
  });

  app.post('/v3/groups', { schema: { body: GroupCreate, response: { 201: one('group', GroupEntity) } } }, async (request, reply) => {
    const auth = authorize(api, request, 'identity:create_group', { group: { domainId: sentField(request, 'group', 'domain_id') ?? defaultDomainOf(caller(request)) } });
    const body = request.body.group;
    const group = await api.identity.createGroup({
      name: body.name,
      domainId: body.domain_id ?? defaultDomainOf(auth),
      description: body.description,
      extra: extraAttributes(body, GROUP_FIELDS),
    });
    reply.code(201);
    return { group: renderGroup(request, group) };
  });

  app.get('/v3/groups/:group_id', { schema: { params: Params, response: { 200: one('group', GroupEntity) } } }, async (request) => {
    authorize(api, request, 'identity:get_group', { group: await groupTarget(api, request.params.group_id) });
    return { group: renderGroup(request, await api.identity.getGroup(request.params.group_id)) };
  });

  app.patch('/v3/groups/:group_id', { schema: { params: Params, body: GroupUpdate, response: { 200: one('group', GroupEntity) } } }, async (request) => {
    authorize(api, request, 'identity:update_group', { group: await groupTarget(api, request.params.group_id) });
    const body = request.body.group;
    const group = await api.identity.updateGroup(request.params.group_id, {
      id: typeof body.id === 'string' ? body.id : undefined,
      name: body.name,
      domainId: body.domain_id,
      description: body.description,
      extra: extraAttributes(body, GROUP_FIELDS),
    });
    return { group: renderGroup(request, group) };
  });
  app.delete('/v3/groups/:group_id', { schema: { params: Params } }, async (request, reply) => {
    // Keystone reads the member before its policy: an id that exists nowhere is 404 for any token.
    const group = await api.identity.getGroup(request.params.group_id);
    authorize(api, request, 'identity:delete_group', { group: { id: group.id, domainId: group.domainId } });
    await api.identity.deleteGroup(request.params.group_id);
    return noContent(reply);
  });

  // A group may hold every user: read and written LIST_PAGE_SIZE members at a time (list-stream.ts).
  app.get('/v3/groups/:group_id/users', { schema: { params: Params, querystring: MemberListQuery, response: { 200: MemberList } } }, async (request, reply) => {
    const auth = authorize(api, request, 'identity:list_users_in_group', { group: await groupTarget(api, request.params.group_id) });
    await api.identity.getGroup(request.params.group_id);
    // A domain-scoped caller sees the group's members of its own domain only, as in Keystone.
    const scopeDomainId = auth.scope.type === 'domain' ? auth.scope.domain.id : undefined;
    const query = request.query;
    const enabled = booleanFilter(query.enabled);
    const domainId = stringParameter(query.domain_id);
    const pages = api.identity.listUserPages(
      {
        groupId: request.params.group_id,
        name: stringMatches(query, 'name'),
        ...(enabled === undefined ? {} : { enabled }),
        ...(domainId === undefined ? {} : { domainId }),
      },
      api.config.listPageSize,
    );
    return sendList(request, reply, 'users', MemberList, pages, (users) =>
      users.filter((user) => scopeDomainId === undefined || user.domainId === scopeDomainId).map((user) => renderUser(request, user)),
    );
  });

  app.put('/v3/groups/:group_id/users/:user_id', { schema: { params: MemberParams } }, async (request, reply) => {
    authorize(api, request, 'identity:add_user_to_group', await memberTarget(api, request.params));
    await api.identity.addUserToGroup(request.params.group_id, request.params.user_id);
    return noContent(reply);
  });

  app.get('/v3/groups/:group_id/users/:user_id', { schema: { params: MemberParams } }, async (request, reply) => {
    authorize(api, request, 'identity:check_user_in_group', await memberTarget(api, request.params));
    await api.identity.checkUserInGroup(request.params.group_id, request.params.user_id);
    return noContent(reply);
  });

  app.delete('/v3/groups/:group_id/users/:user_id', { schema: { params: MemberParams } }, async (request, reply) => {
    authorize(api, request, 'identity:remove_user_from_group', await memberTarget(api, request.params));
    await api.identity.removeUserFromGroup(request.params.group_id, request.params.user_id);
    return noContent(reply);
  });
}
