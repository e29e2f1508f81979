import type { Credential } from '../../credential/credential-service.ts';
import { ForbiddenError, ValidationError } from '../../support/errors.ts';
import { isDelegated } from '../../token/delegation.ts';
import type { TokenContext } from '../../token/token-service.ts';
import { pythonRepr } from '../errors.ts';
import { authorize, caller, extraAttributes, noContent, type App, type IdentityApi, type Request } from '../context.ts';
import { sentField } from '../decision-order.ts';
import { collectionLinks } from '../links.ts';
import { matchParameters, querySchema, stringMatches } from '../query.ts';
import { renderCredential, renderEc2Credential, renderToken } from '../render.ts';
import { catalogFor } from '../../token/issue-token.ts';
import {
  CredentialCreate,
  CredentialEntity,
  CredentialUpdate,
  Ec2CredentialCreate,
  Ec2CredentialEntity,
  SignedRequestBody,
  TokenBody,
  many,
  one,
  params,
} from '../schemas.ts';

const CredentialParams = params('credential_id');
const CredentialListQuery = querySchema(...matchParameters('user_id'), ...matchParameters('type'));
const UserParams = params('user_id');
const Ec2Params = params('user_id', 'credential_id');
// Not extra attributes: the columns, and what Keystone sets itself.
const CREDENTIAL_FIELDS = ['id', 'user_id', 'project_id', 'type', 'blob', 'links'] as const;

/**
 * Keystone refuses delegated tokens (a trust's, an application credential's, an EC2 signature's,
 * OAuth1's) any access to credentials: they could otherwise mint credentials that outlive the
 * delegation (its security fixes of 2026, which Debian's Keystone 22 carries).
 */
function requirePrimaryAuth(auth: TokenContext): void {
  if (isDelegated(auth)) throw ForbiddenError.action('Delegated tokens cannot access credentials directly');
}

/**
 * Keystone's credential_create oneOf: an ec2 credential needs blob, type, user_id and project_id;
 * any other type blob, type and user_id. Its message is jsonschema's first line.
 */
function checkCreate(body: Record<string, unknown>): { type: string; blob: string; userId: string; projectId: string | undefined } {
  const { type, blob, user_id: userId, project_id: projectId } = body;
  const required = type === 'ec2' ? [blob, type, userId, projectId] : [blob, type, userId];
  if (required.some((value) => value === undefined)) throw new ValidationError(`${pythonRepr(body)} is not valid under any of the given schemas`);
  return { type: type as string, blob: blob as string, userId: userId as string, projectId: projectId as string | undefined };
}

/** Whether the caller may see this credential (Keystone filters lists through get_credential). */
function mayRead(api: IdentityApi, auth: TokenContext, credential: Credential): boolean {
  try {
    api.authorizer.enforce(auth, 'identity:get_credential', { credential: { userId: credential.userId } });
    requirePrimaryAuth(auth);
    return true;
  } catch (error) {
    if (error instanceof ForbiddenError) return false;
    throw error;
  }
}

/** The policy target of a credential route: the credential when it exists (else none: admins only pass). */
async function credentialTarget(api: IdentityApi, id: string): Promise<{ credential?: { userId: string } }> {
  const credential = await api.credentials.find(id);
  return credential ? { credential: { userId: credential.userId } } : {};
}

/** /v3/credentials, OS-EC2 (/v3/users/{user_id}/credentials/OS-EC2) and /v3/ec2tokens, /v3/s3tokens. */
export function registerCredentialRoutes(app: App, api: IdentityApi): void {
  // ---- /v3/credentials -----------------------------------------------------------------------
  app.get('/v3/credentials', { schema: { querystring: CredentialListQuery, response: { 200: many('credentials', CredentialEntity) } } }, async (request) => {
    const auth = caller(request);
    // A token without system scope lists as the owner of what it lists; each one is checked below.
    authorize(api, request, 'identity:list_credentials', auth.scope.type === 'system' ? {} : { credential: { userId: auth.user.id } });
    const credentials = await api.credentials.list({ userId: stringMatches(request.query, 'user_id'), type: stringMatches(request.query, 'type') });
    return {
      // Keystone drops every credential from a delegated token's list (as it refuses them one by one).
      credentials: credentials.filter((credential) => !isDelegated(auth) && mayRead(api, auth, credential)).map((credential) => renderCredential(request, credential)),
      links: collectionLinks(request),
    };
  });

  app.post('/v3/credentials', { schema: { body: CredentialCreate, response: { 201: one('credential', CredentialEntity) } } }, async (request, reply) => {
    const userId = sentField(request, 'credential', 'user_id');
    const auth = authorize(api, request, 'identity:create_credential', userId === undefined ? {} : { credential: { userId } });
    const body = request.body.credential ?? {};
    const input = checkCreate(body);
    requirePrimaryAuth(auth);
    const credential = await api.credentials.create({ ...input, extra: extraAttributes(body, CREDENTIAL_FIELDS) });
    reply.code(201);
    return { credential: renderCredential(request, credential) };
  });

  app.get('/v3/credentials/:credential_id', { schema: { params: CredentialParams, response: { 200: one('credential', CredentialEntity) } } }, async (request) => {
    const id = request.params.credential_id;
    const auth = authorize(api, request, 'identity:get_credential', await credentialTarget(api, id));
    const credential = await api.credentials.get(id);
    requirePrimaryAuth(auth);
    return { credential: renderCredential(request, credential) };
  });

  app.patch(
    '/v3/credentials/:credential_id',
    { schema: { params: CredentialParams, body: CredentialUpdate, response: { 200: one('credential', CredentialEntity) } } },
    async (request) => {
      const id = request.params.credential_id;
      const auth = authorize(api, request, 'identity:update_credential', await credentialTarget(api, id));
      const body = request.body.credential ?? {};
      const unexpected = Object.keys(body).filter((key) => key !== 'blob');
      if (unexpected.length === 1) throw new ValidationError(`Additional properties are not allowed ('${unexpected[0]}' was unexpected)`);
      if (unexpected.length > 1) throw new ValidationError(`Additional properties are not allowed (${unexpected.map((key) => `'${key}'`).join(', ')} were unexpected)`);
      if (body.blob === undefined) throw new ValidationError("'blob' is a required property");
      await api.credentials.get(id);
      requirePrimaryAuth(auth);
      return { credential: renderCredential(request, await api.credentials.update(id, body.blob)) };
    },
  );

  app.delete('/v3/credentials/:credential_id', { schema: { params: CredentialParams } }, async (request, reply) => {
    const id = request.params.credential_id;
    const auth = authorize(api, request, 'identity:delete_credential', await credentialTarget(api, id));
    await api.credentials.get(id);
    requirePrimaryAuth(auth);
    await api.credentials.delete(id);
    return noContent(reply);
  });

  // ---- OS-EC2 --------------------------------------------------------------------------------
  const OS_EC2 = '/v3/users/:user_id/credentials/OS-EC2';

  app.get(OS_EC2, { schema: { params: UserParams, response: { 200: many('credentials', Ec2CredentialEntity) } } }, async (request) => {
    const auth = authorize(api, request, 'identity:ec2_list_credentials', { user: { id: request.params.user_id } });
    requirePrimaryAuth(auth);
    const credentials = await api.credentials.listEc2(request.params.user_id);
    return { credentials: credentials.map((credential) => renderEc2Credential(request, credential)), links: collectionLinks(request) };
  });

  app.post(OS_EC2, { schema: { params: UserParams, body: Ec2CredentialCreate, response: { 201: one('credential', Ec2CredentialEntity) } } }, async (request, reply) => {
    const userId = request.params.user_id;
    const auth = authorize(api, request, 'identity:ec2_create_credential', { user: { id: userId }, credential: { userId } });
    requirePrimaryAuth(auth);
    const tenantId = request.body.tenant_id;
    const credential = await api.credentials.createEc2(userId, typeof tenantId === 'string' ? tenantId : undefined);
    reply.code(201);
    return { credential: renderEc2Credential(request, credential) };
  });

  /** Keystone looks the credential up for the policy target first: an unknown access key is 404 for anyone. */
  const ec2Target = async (request: Request) => {
    const { credential_id: access } = request.params as { credential_id: string };
    const credential = await api.credentials.getByAccess(access);
    return { credential: { userId: credential.userId } };
  };

  app.get(`${OS_EC2}/:credential_id`, { schema: { params: Ec2Params, response: { 200: one('credential', Ec2CredentialEntity) } } }, async (request) => {
    const auth = authorize(api, request, 'identity:ec2_get_credential', await ec2Target(request));
    requirePrimaryAuth(auth);
    const credential = await api.credentials.getEc2(request.params.user_id, request.params.credential_id);
    return { credential: renderEc2Credential(request, credential) };
  });

  app.delete(`${OS_EC2}/:credential_id`, { schema: { params: Ec2Params } }, async (request, reply) => {
    const auth = authorize(api, request, 'identity:ec2_delete_credential', await ec2Target(request));
    requirePrimaryAuth(auth);
    await api.credentials.deleteEc2(request.params.user_id, request.params.credential_id);
    return noContent(reply);
  });

  // ---- /v3/ec2tokens and /v3/s3tokens ----------------------------------------------------------
  // Keystone 22 (with its security fixes) asks for a token of a service or an admin here, then
  // checks the signature of the request the client signed.
  app.post('/v3/ec2tokens', { schema: { body: SignedRequestBody, response: { 200: TokenBody } } }, async (request, reply) => {
    authorize(api, request, 'identity:ec2tokens_validate');
    const token = await api.credentials.authenticate('ec2', request.body);
    reply.header('X-Subject-Token', token.id);
    return { token: renderToken(token, await catalogFor(api.clientCatalog, token), await api.federation.enabledServiceProviders()) };
  });

  app.post('/v3/s3tokens', { schema: { body: SignedRequestBody, response: { 200: TokenBody } } }, async (request) => {
    authorize(api, request, 'identity:s3tokens_validate');
    const token = await api.credentials.authenticate('s3', request.body);
    return { token: renderToken(token, await catalogFor(api.clientCatalog, token), await api.federation.enabledServiceProviders()) };
  });
}
