import { Type } from 'typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { App } from '../context.ts';
import { baseUrl } from '../links.ts';
import { Version } from '../schemas.ts';

/** The Keystone identity API version this service speaks (Keystone 22's). */
export const IDENTITY_API_VERSION = 'v3.14';

function version(request: FastifyRequest) {
  return {
    id: IDENTITY_API_VERSION,
    status: 'stable',
    updated: '2020-04-07T00:00:00Z',
    links: [{ rel: 'self', href: `${baseUrl(request)}/v3/` }],
    'media-types': [{ base: 'application/json', type: 'application/vnd.openstack.identity-v3+json' }],
  };
}

function wantsJsonHome(request: FastifyRequest): boolean {
  const accept = request.headers.accept ?? '';
  return accept.includes('application/json-home') && !/application\/json(?!-home)/.test(accept.split('application/json-home')[0] ?? '');
}

/** A minimal JSON-Home document; no client we serve reads more than its presence. */
function sendJsonHome(reply: FastifyReply): FastifyReply {
  return reply.code(200).type('application/json-home').send(JSON.stringify({ resources: {} }));
}

/** Version discovery: GET / (300, the list) and GET /v3 (200, this version). */
export function registerDiscoveryRoutes(app: App): void {
  app.get(
    '/',
    { config: { public: true }, schema: { response: { 300: Type.Object({ versions: Type.Object({ values: Type.Array(Version) }) }) } } },
    async (request, reply) => {
      if (wantsJsonHome(request)) return sendJsonHome(reply);
      reply.code(300).header('Location', `${baseUrl(request)}/v3/`);
      return { versions: { values: [version(request)] } };
    },
  );
  app.get('/v3', { config: { public: true }, schema: { response: { 200: Type.Object({ version: Version }) } } }, async (request, reply) => {
    if (wantsJsonHome(request)) return sendJsonHome(reply);
    return { version: version(request) };
  });
}
