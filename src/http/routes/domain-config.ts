import { Type } from 'typebox';
import { authorize, noContent, type App, type IdentityApi } from '../context.ts';
import { params } from '../schemas.ts';

const ConfigParams = params('domain_id');
const GroupParams = params('domain_id', 'group');
const OptionParams = params('domain_id', 'group', 'option');
const DefaultGroupParams = params('group');
const DefaultOptionParams = params('group', 'option');
/** `{"config": {...}}`: what `config` holds is checked by the service, in Keystone's words. */
const ConfigBody = Type.Object({ config: Type.Optional(Type.Unknown()) }, { additionalProperties: true });
/** Groups of options, or one option alone. */
const ConfigAnswer = Type.Object({ config: Type.Record(Type.String(), Type.Unknown()) });
const SECURITY_COMPLIANCE = 'security_compliance';

/** Keystone's domain configuration API: /v3/domains/{domain_id}/config… and its defaults. */
export function registerDomainConfigRoutes(app: App, api: IdentityApi): void {
  const configs = api.domainConfigs;

  // ---- defaults (before the domain routes: `config` is not a domain id here) ------------------
  app.get('/v3/domains/config/default', { schema: { response: { 200: ConfigAnswer } } }, async (request) => {
    authorize(api, request, 'identity:get_domain_config_default');
    return { config: configs.defaultConfig() };
  });
  app.get('/v3/domains/config/:group/default', { schema: { params: DefaultGroupParams, response: { 200: ConfigAnswer } } }, async (request) => {
    authorize(api, request, 'identity:get_domain_config_default');
    return { config: configs.defaultConfig({ group: request.params.group }) };
  });
  app.get('/v3/domains/config/:group/:option/default', { schema: { params: DefaultOptionParams, response: { 200: ConfigAnswer } } }, async (request) => {
    authorize(api, request, 'identity:get_domain_config_default');
    return { config: configs.defaultConfig({ group: request.params.group, option: request.params.option }) };
  });

  // ---- a domain's configuration ---------------------------------------------------------------
  app.get('/v3/domains/:domain_id/config', { schema: { params: ConfigParams, response: { 200: ConfigAnswer } } }, async (request) => {
    authorize(api, request, 'identity:get_domain_config');
    return { config: await configs.getConfig(request.params.domain_id) };
  });
  app.put('/v3/domains/:domain_id/config', { schema: { params: ConfigParams, body: ConfigBody, response: { 200: ConfigAnswer, 201: ConfigAnswer } } },
    async (request, reply) => {
      authorize(api, request, 'identity:create_domain_config');
      const { config, created } = await configs.createConfig(request.params.domain_id, request.body.config);
      // 201 for a first configuration, 200 when it replaced one (Keystone's answers).
      reply.code(created ? 201 : 200);
      return { config };
    },
  );
  app.patch('/v3/domains/:domain_id/config', { schema: { params: ConfigParams, body: ConfigBody, response: { 200: ConfigAnswer } } }, async (request) => {
    authorize(api, request, 'identity:update_domain_config');
    return { config: await configs.updateConfig(request.params.domain_id, request.body.config) };
  });
  app.delete('/v3/domains/:domain_id/config', { schema: { params: ConfigParams } }, async (request, reply) => {
    authorize(api, request, 'identity:delete_domain_config');
    await configs.deleteConfig(request.params.domain_id);
    return noContent(reply);
  });

  // ---- a group ---------------------------------------------------------------------------------
  app.get('/v3/domains/:domain_id/config/:group', { schema: { params: GroupParams, response: { 200: ConfigAnswer } } }, async (request) => {
    const { domain_id: domainId, group } = request.params;
    // The password rules of the default domain: anyone may read them (their own rule).
    if (group === SECURITY_COMPLIANCE) {
      authorize(api, request, 'identity:get_security_compliance_domain_config');
      return { config: configs.securityComplianceConfig(domainId) };
    }
    authorize(api, request, 'identity:get_domain_config');
    return { config: await configs.getConfig(domainId, { group }) };
  });
  app.patch('/v3/domains/:domain_id/config/:group', { schema: { params: GroupParams, body: ConfigBody, response: { 200: ConfigAnswer } } }, async (request) => {
    authorize(api, request, 'identity:update_domain_config');
    return { config: await configs.updateConfig(request.params.domain_id, request.body.config, { group: request.params.group }) };
  });
  app.delete('/v3/domains/:domain_id/config/:group', { schema: { params: GroupParams } }, async (request, reply) => {
    authorize(api, request, 'identity:delete_domain_config');
    await configs.deleteConfig(request.params.domain_id, { group: request.params.group });
    return noContent(reply);
  });

  // ---- an option -------------------------------------------------------------------------------
  app.get('/v3/domains/:domain_id/config/:group/:option', { schema: { params: OptionParams, response: { 200: ConfigAnswer } } }, async (request) => {
    const { domain_id: domainId, group, option } = request.params;
    if (group === SECURITY_COMPLIANCE) {
      authorize(api, request, 'identity:get_security_compliance_domain_config');
      return { config: configs.securityComplianceConfig(domainId, option) };
    }
    authorize(api, request, 'identity:get_domain_config');
    return { config: await configs.getConfig(domainId, { group, option }) };
  });
  app.patch('/v3/domains/:domain_id/config/:group/:option', { schema: { params: OptionParams, body: ConfigBody, response: { 200: ConfigAnswer } } },
    async (request) => {
      const { domain_id: domainId, group, option } = request.params;
      authorize(api, request, 'identity:update_domain_config');
      // Keystone reads a missing `config` as {}.
      return { config: await configs.updateConfig(domainId, request.body.config ?? {}, { group, option }) };
    },
  );
  app.delete('/v3/domains/:domain_id/config/:group/:option', { schema: { params: OptionParams } }, async (request, reply) => {
    authorize(api, request, 'identity:delete_domain_config');
    await configs.deleteConfig(request.params.domain_id, { group: request.params.group, option: request.params.option });
    return noContent(reply);
  });
}
