import { ValidationError } from '../../support/errors.ts';
import { authorize, extraAttributes, noContent, type App, type IdentityApi } from '../context.ts';
import { collectionLinks } from '../links.ts';
import { booleanFilter, matchParameters, querySchema, stringMatches } from '../query.ts';
import { renderDomain } from '../render.ts';
import { DomainCreate, DomainEntity, DomainUpdate, many, one, params } from '../schemas.ts';

const DOMAIN_FIELDS = ['id', 'name', 'description', 'enabled', 'tags', 'options', 'explicit_domain_id', 'links'] as const;
const Params = params('domain_id');
const DomainListQuery = querySchema(...matchParameters('name'), 'enabled');

export function registerDomainRoutes(app: App, api: IdentityApi): void {
  app.get('/v3/domains', { schema: { querystring: DomainListQuery, response: { 200: many('domains', DomainEntity) } } }, async (request) => {
    authorize(api, request, 'identity:list_domains');
    const query = request.query;
    const enabled = booleanFilter(query.enabled);
    const domains = await api.resources.listDomains({
      name: stringMatches(query, 'name'),
      ...(enabled === undefined ? {} : { enabled }),
    });
    return { domains: domains.map((domain) => renderDomain(request, domain)), links: collectionLinks(request) };
  });

  app.post('/v3/domains', { schema: { body: DomainCreate, response: { 201: one('domain', DomainEntity) } } }, async (request, reply) => {
    authorize(api, request, 'identity:create_domain');
    const body = request.body.domain;
    if (body.explicit_domain_id !== undefined && !/^[0-9a-f]{32}$/i.test(body.explicit_domain_id)) {
      throw new ValidationError('Domain ID does not conform to required UUID format.');
    }
    const domain = await api.resources.createDomain({
      id: body.explicit_domain_id?.toLowerCase(),
      name: body.name,
      description: body.description,
      enabled: body.enabled,
      tags: body.tags,
      options: body.options,
      extra: extraAttributes(body, DOMAIN_FIELDS),
    });
    reply.code(201);
    return { domain: renderDomain(request, domain) };
  });

  app.get('/v3/domains/:domain_id', { schema: { params: Params, response: { 200: one('domain', DomainEntity) } } }, async (request) => {
    authorize(api, request, 'identity:get_domain', { domain: { id: request.params.domain_id } });
    return { domain: renderDomain(request, await api.resources.getDomain(request.params.domain_id)) };
  });

  app.patch('/v3/domains/:domain_id', { schema: { params: Params, body: DomainUpdate, response: { 200: one('domain', DomainEntity) } } },
    async (request) => {
      // Keystone reads the member before its policy: an id that exists nowhere is 404 for any token.
      await api.resources.getDomain(request.params.domain_id);
      authorize(api, request, 'identity:update_domain', { domain: { id: request.params.domain_id } });
      // Keystone silently ignores an id in a domain update.
      const body = request.body.domain;
      const domain = await api.resources.updateDomain(request.params.domain_id, {
        name: body.name,
        description: body.description,
        enabled: body.enabled,
        tags: body.tags,
        options: body.options,
        extra: extraAttributes(body, DOMAIN_FIELDS),
      });
      return { domain: renderDomain(request, domain) };
    },
  );

  app.delete('/v3/domains/:domain_id', { schema: { params: Params } }, async (request, reply) => {
    // Keystone reads the member before its policy: an id that exists nowhere is 404 for any token.
    await api.resources.getDomain(request.params.domain_id);
    authorize(api, request, 'identity:delete_domain', { domain: { id: request.params.domain_id } });
    await api.resources.deleteDomain(request.params.domain_id);
    return noContent(reply);
  });
}
