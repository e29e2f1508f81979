import { Type } from 'typebox';
import type { FastifyReply } from 'fastify';
import type { SamlAssertionResult } from '../../federation/saml/saml-idp.ts';
import type { App, IdentityApi } from '../context.ts';

// keystone/federation/schema.py saml_create (the `auth` object) with basic_property_id.
const PropertyId = Type.Object({ id: Type.String() }, { additionalProperties: false });
const SamlAuthBody = Type.Object({
  auth: Type.Object(
    {
      identity: Type.Object({ token: PropertyId, methods: Type.Optional(Type.Array(Type.Unknown())) }, { additionalProperties: false }),
      scope: Type.Object({ service_provider: PropertyId }, { additionalProperties: false }),
    },
    { additionalProperties: false },
  ),
});

/** Keystone's _build_response_headers: the XML, and where the client takes it next. */
function sendAssertion(reply: FastifyReply, result: SamlAssertionResult) {
  return reply
    .code(200)
    .type('text/xml')
    .header('X-sp-url', result.serviceProvider.spUrl)
    .header('X-auth-url', result.serviceProvider.authUrl)
    .send(result.xml);
}

/**
 * Keystone-to-Keystone, this service as the SAML identity provider: its metadata, and a project-scoped
 * token exchanged for a signed assertion for a service provider. Keystone marks all three
 * unenforced_api: no X-Auth-Token and no policy rule; the token in the body is what is checked.
 */
export function registerSamlIdpRoutes(app: App, api: IdentityApi): void {
  app.get('/v3/OS-FEDERATION/saml2/metadata', { config: { public: true } }, async (_request, reply) =>
    reply.type('text/xml').send(api.saml.metadata()),
  );

  app.post('/v3/auth/OS-FEDERATION/saml2', { config: { public: true }, schema: { body: SamlAuthBody } }, async (request, reply) => {
    const { identity, scope } = request.body.auth;
    return sendAssertion(reply, await api.saml.assertion(identity.token.id, scope.service_provider.id, 'response'));
  });

  app.post('/v3/auth/OS-FEDERATION/saml2/ecp', { config: { public: true }, schema: { body: SamlAuthBody } }, async (request, reply) => {
    const { identity, scope } = request.body.auth;
    return sendAssertion(reply, await api.saml.assertion(identity.token.id, scope.service_provider.id, 'ecp'));
  });
}
