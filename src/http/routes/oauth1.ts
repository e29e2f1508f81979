import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { AccessToken, Consumer, IssuedCredential } from '../../oauth1/oauth1-service.ts';
import { ValidationError } from '../../support/errors.ts';
import { authorize, extraAttributes, noContent, signedRequest, type App, type IdentityApi } from '../context.ts';
import { baseUrl, collectionLinks } from '../links.ts';
import { renderRole } from '../render.ts';
import {
  ConsumerCreate,
  ConsumerEntity,
  ConsumerUpdate,
  CreatedConsumerEntity,
  OAuth1AccessTokenEntity,
  OAuth1Credentials,
  OAuth1Verifier,
  RequestTokenAuthorize,
  RoleEntity,
  many,
  one,
  params,
} from '../schemas.ts';

const ConsumerParams = params('consumer_id');
const RequestTokenParams = params('request_token_id');
const UserParams = params('user_id');
const AccessTokenParams = params('user_id', 'access_token_id');
const AccessTokenRoleParams = params('user_id', 'access_token_id', 'role_id');
const SignedHeaders = Type.Object({
  authorization: Type.Optional(Type.String({ description: 'OAuth 1.0a parameters (RFC 5849 §3.5.1), HMAC-signed.' })),
});
const RequestTokenHeaders = Type.Object({
  authorization: Type.Optional(Type.String({ description: 'OAuth 1.0a parameters signed by the consumer.' })),
  'requested-project-id': Type.Optional(Type.String({ description: 'The project the consumer asks to act on.' })),
});

/** Keystone's expires_at of OAuth1 tokens: ISO 8601 with microseconds and Z. */
function oauthTime(date: Date | null): string | null {
  return date ? `${date.toISOString().slice(0, -1)}000Z` : null;
}

function renderConsumer(request: FastifyRequest, consumer: Consumer) {
  return {
    ...consumer.extra,
    id: consumer.id,
    description: consumer.description,
    links: { self: `${baseUrl(request)}/v3/OS-OAUTH1/consumers/${consumer.id}` },
  };
}

function renderAccessToken(request: FastifyRequest, token: AccessToken) {
  const self = `${baseUrl(request)}/v3/users/${token.authorizingUserId}/OS-OAUTH1/access_tokens/${token.id}`;
  return {
    id: token.id,
    authorizing_user_id: token.authorizingUserId,
    project_id: token.projectId,
    consumer_id: token.consumerId,
    expires_at: oauthTime(token.expiresAt),
    links: { roles: `${self}/roles`, self },
  };
}

/** The signed endpoints' answer: a form-encoded body, as Keystone writes it (its ids and secrets are hex). */
function sendCredentials(reply: FastifyReply, credential: IssuedCredential): string {
  reply.code(201).header('content-type', 'application/x-www-form-urlencoded');
  const expiry = credential.expiresAt ? `&oauth_expires_at=${oauthTime(credential.expiresAt)}` : '';
  return `oauth_token=${credential.id}&oauth_token_secret=${credential.secret}${expiry}`;
}

/** /v3/OS-OAUTH1/*: consumers and the delegation flow; /v3/users/{user_id}/OS-OAUTH1/access_tokens. */
export function registerOAuth1Routes(app: App, api: IdentityApi): void {
  app.post(
    '/v3/OS-OAUTH1/consumers',
    { schema: { body: ConsumerCreate, response: { 201: one('consumer', CreatedConsumerEntity) } } },
    async (request, reply) => {
      authorize(api, request, 'identity:create_consumer');
      const body = (request.body.consumer ?? {}) as Record<string, unknown>;
      const { consumer, secret } = await api.oauth1.createConsumer({
        description: body.description as string | null | undefined,
        extra: extraAttributes(body, ['id', 'description', 'secret']),
      });
      reply.code(201);
      const { links, ...rendered } = renderConsumer(request, consumer);
      return { consumer: { ...rendered, secret, links } };
    },
  );

  app.get('/v3/OS-OAUTH1/consumers', { schema: { response: { 200: many('consumers', ConsumerEntity) } } }, async (request) => {
    authorize(api, request, 'identity:list_consumers');
    const consumers = await api.oauth1.listConsumers();
    return { consumers: consumers.map((consumer) => renderConsumer(request, consumer)), links: collectionLinks(request) };
  });

  app.get('/v3/OS-OAUTH1/consumers/:consumer_id', { schema: { params: ConsumerParams, response: { 200: one('consumer', ConsumerEntity) } } }, async (request) => {
    authorize(api, request, 'identity:get_consumer');
    return { consumer: renderConsumer(request, await api.oauth1.getConsumer(request.params.consumer_id)) };
  });

  app.patch(
    '/v3/OS-OAUTH1/consumers/:consumer_id',
    { schema: { params: ConsumerParams, body: ConsumerUpdate, response: { 200: one('consumer', ConsumerEntity) } } },
    async (request) => {
      authorize(api, request, 'identity:update_consumer');
      const body = request.body.consumer as Record<string, unknown>;
      if (body.id !== undefined && body.id !== request.params.consumer_id) throw ValidationError.idChange();
      const consumer = await api.oauth1.updateConsumer(request.params.consumer_id, {
        description: body.description as string | null | undefined,
        extra: extraAttributes(body, ['id', 'description', 'secret']),
      });
      return { consumer: renderConsumer(request, consumer) };
    },
  );

  app.delete('/v3/OS-OAUTH1/consumers/:consumer_id', { schema: { params: ConsumerParams } }, async (request, reply) => {
    authorize(api, request, 'identity:delete_consumer');
    await api.oauth1.deleteConsumer(request.params.consumer_id);
    return noContent(reply);
  });

  // Signed by the consumer, not a token: public routes (the signature authenticates).
  app.post(
    '/v3/OS-OAUTH1/request_token',
    { config: { public: true }, schema: { headers: RequestTokenHeaders, response: { 201: OAuth1Credentials } } },
    async (request, reply) => {
      const project = request.headers['requested-project-id'];
      const credential = await api.oauth1.createRequestToken(signedRequest(request), typeof project === 'string' && project ? project : undefined);
      return sendCredentials(reply, credential);
    },
  );

  app.put(
    '/v3/OS-OAUTH1/authorize/:request_token_id',
    { schema: { params: RequestTokenParams, body: RequestTokenAuthorize, response: { 200: OAuth1Verifier } } },
    async (request) => {
      const auth = authorize(api, request, 'identity:authorize_request_token');
      const verifier = await api.oauth1.authorizeRequestToken(
        request.params.request_token_id,
        { userId: auth.user.id, delegated: auth.oauth1 !== undefined },
        request.body.roles ?? [],
      );
      return { token: { oauth_verifier: verifier } };
    },
  );

  app.post(
    '/v3/OS-OAUTH1/access_token',
    { config: { public: true }, schema: { headers: SignedHeaders, response: { 201: OAuth1Credentials } } },
    async (request, reply) => sendCredentials(reply, await api.oauth1.createAccessToken(signedRequest(request))),
  );

  app.get(
    '/v3/users/:user_id/OS-OAUTH1/access_tokens',
    { schema: { params: UserParams, response: { 200: many('access_tokens', OAuth1AccessTokenEntity) } } },
    async (request) => {
      const auth = authorize(api, request, 'identity:list_access_tokens', { user: { id: request.params.user_id } });
      const tokens = await api.oauth1.listAccessTokens(request.params.user_id, auth.oauth1 !== undefined);
      return { access_tokens: tokens.map((token) => renderAccessToken(request, token)), links: collectionLinks(request) };
    },
  );

  app.get(
    '/v3/users/:user_id/OS-OAUTH1/access_tokens/:access_token_id',
    { schema: { params: AccessTokenParams, response: { 200: one('access_token', OAuth1AccessTokenEntity) } } },
    async (request) => {
      authorize(api, request, 'identity:get_access_token', { user: { id: request.params.user_id } });
      return { access_token: renderAccessToken(request, await api.oauth1.getAccessToken(request.params.user_id, request.params.access_token_id)) };
    },
  );

  app.delete('/v3/users/:user_id/OS-OAUTH1/access_tokens/:access_token_id', { schema: { params: AccessTokenParams } }, async (request, reply) => {
    authorize(api, request, 'identity:delete_access_token', { user: { id: request.params.user_id } });
    await api.oauth1.deleteAccessToken(request.params.user_id, request.params.access_token_id);
    return noContent(reply);
  });

  app.get(
    '/v3/users/:user_id/OS-OAUTH1/access_tokens/:access_token_id/roles',
    { schema: { params: AccessTokenParams, response: { 200: many('roles', RoleEntity) } } },
    async (request) => {
      authorize(api, request, 'identity:list_access_token_roles', { user: { id: request.params.user_id } });
      const roles = await api.oauth1.accessTokenRoles(request.params.user_id, request.params.access_token_id);
      return { roles: roles.map((role) => renderRole(request, role)), links: collectionLinks(request) };
    },
  );

  app.get(
    '/v3/users/:user_id/OS-OAUTH1/access_tokens/:access_token_id/roles/:role_id',
    { schema: { params: AccessTokenRoleParams, response: { 200: one('role', RoleEntity) } } },
    async (request) => {
      authorize(api, request, 'identity:get_access_token_role', { user: { id: request.params.user_id } });
      const role = await api.oauth1.accessTokenRole(request.params.user_id, request.params.access_token_id, request.params.role_id);
      return { role: renderRole(request, role) };
    },
  );
}
