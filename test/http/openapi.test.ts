import type net from 'node:net';
import t from 'tap';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { buildOpenApiDocument, openApiPath, type OpenApiDocument, type OpenApiResponse } from '../../src/http/openapi.ts';
import { PUBLIC_URL, startTestApp } from '../helpers/app.ts';

/** The value a JSON pointer (`#/a/b~1c`) names in `document`, or undefined. */
function resolvePointer(document: unknown, ref: string): unknown {
  if (!ref.startsWith('#/')) return undefined;
  let value: any = document;
  for (const token of ref.slice(2).split('/')) {
    const key = token.replace(/~1/g, '/').replace(/~0/g, '~');
    if (value === null || typeof value !== 'object' || !(key in value)) return undefined;
    value = value[key];
  }
  return value;
}

function refsIn(value: unknown, found: string[] = []): string[] {
  if (Array.isArray(value)) for (const item of value) refsIn(item, found);
  else if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      if (key === '$ref' && typeof item === 'string') found.push(item);
      else refsIn(item, found);
    }
  }
  return found;
}

const pointerToken = (key: string) => key.replace(/~/g, '~0').replace(/\//g, '~1');

/**
 * A validator of response bodies against the document: the response declared for a route and
 * status (exact, else its class `4XX`, else `default`), followed through `$ref`s.
 */
function responseValidator(document: OpenApiDocument) {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  ajv.addSchema(document as object, 'openapi.json');
  return (method: string, url: string, status: number, body: unknown): string[] => {
    const path = openApiPath(url);
    const responses = document.paths[path]?.[method.toLowerCase()]?.responses;
    if (!responses) return [`no operation ${method} ${path}`];
    const key = [String(status), `${String(status)[0]}XX`, 'default'].find((candidate) => candidate in responses);
    if (!key) return [`no response ${status} for ${method} ${path}`];
    let pointer = `#/paths/${pointerToken(path)}/${method.toLowerCase()}/responses/${key}`;
    let response = responses[key] as OpenApiResponse;
    while ('$ref' in response) {
      pointer = response.$ref;
      response = resolvePointer(document, pointer) as OpenApiResponse;
    }
    if (!response.content?.['application/json']) return [`${method} ${path} ${key} declares no body`];
    const validate = ajv.getSchema(`openapi.json${pointer}/content/application~1json/schema`);
    if (!validate) return [`no schema at ${pointer}`];
    return validate(body) ? [] : (validate.errors ?? []).map((error) => `${error.instancePath} ${error.message}`);
  };
}

t.test('the OpenAPI document: every registered route, once, with resolvable references', async (t) => {
  const { app, request } = await startTestApp(t);
  const response = await request({ method: 'GET', url: '/openapi.json' });
  t.equal(response.statusCode, 200, 'no token needed');
  t.match(response.headers['content-type'], /^application\/json/);
  const document = response.json() as OpenApiDocument & { servers: Array<{ url: string }> };

  t.match(document.openapi, /^3\.1\.\d+$/);
  t.equal(document.info.title, 'keystone-gateway');
  t.equal(document.info.version, 'v3.14');
  t.same(document.servers, [{ url: PUBLIC_URL }], 'the server is where the document was fetched from');
  t.equal(document.components.securitySchemes.keystoneToken?.name, 'X-Auth-Token');

  // Each registered route is one operation, and there is no operation without a route.
  const registered = app.routes.map((route) => `${route.method.toLowerCase()} ${openApiPath(route.url)}`);
  t.equal(new Set(registered).size, registered.length, 'each route is registered once');
  const documented = Object.entries(document.paths).flatMap(([path, operations]) => Object.keys(operations).map((method) => `${method} ${path}`));
  t.same(documented.sort(), [...registered].sort(), 'the operations are exactly the registered routes');
  t.ok(documented.length > 150, `${documented.length} operations`);
  const operationIds = Object.values(document.paths).flatMap((operations) => Object.values(operations).map((operation) => operation.operationId));
  t.equal(new Set(operationIds).size, operationIds.length, 'operation ids are unique');
  for (const path of ['/v3/gateway/policy/explain', '/v3/gateway/decisions/{request_id}', '/openapi.json', '/api-docs']) {
    t.ok(document.paths[path], `${path} is documented`);
  }

  // Security follows config.public; every path parameter is declared.
  for (const route of app.routes) {
    const path = openApiPath(route.url);
    const operation = document.paths[path]![route.method.toLowerCase()]!;
    const expected = route.public ? [] : [{ keystoneToken: [] }];
    if (JSON.stringify(operation.security) !== JSON.stringify(expected)) t.fail(`${route.method} ${path}: security ${JSON.stringify(operation.security)}`);
    for (const [, name] of path.matchAll(/\{([^}]+)\}/g)) {
      if (!operation.parameters?.some((parameter) => parameter.in === 'path' && parameter.name === name && parameter.required)) t.fail(`${route.method} ${path}: no path parameter ${name}`);
    }
    if (!operation.responses['4XX'] || !operation.responses['5XX']) t.fail(`${route.method} ${path}: no error responses`);
  }
  t.same(document.paths['/v3/auth/tokens']!.post!.security, [], 'token issue is public');
  t.same(document.paths['/v3/users']!.get!.security, [{ keystoneToken: [] }], 'listing users needs a token');
  t.ok(document.paths['/v3/projects']!.get!.parameters?.some((parameter) => parameter.in === 'query' && parameter.name === 'name__contains'), 'query parameters');
  t.ok(document.paths['/v3/projects']!.post!.requestBody, 'request bodies');
  t.ok(document.paths['/v3/auth/tokens']!.get!.parameters?.some((parameter) => parameter.in === 'header' && parameter.name === 'x-subject-token'), 'header parameters');
  t.ok(document.paths['/v3/projects/{project_id}']!.delete!.responses['2XX'], 'a route without a declared response still has a success');

  const refs = refsIn(document);
  t.ok(refs.length > 0, `${refs.length} references`);
  const unresolved = refs.filter((ref) => resolvePointer(document, ref) === undefined);
  t.same(unresolved, [], 'every $ref resolves');
  t.notOk(JSON.stringify(document).includes('"~'), 'no TypeBox-internal keys');

  // Every schema the document holds is valid JSON Schema 2020-12 (OpenAPI 3.1's dialect).
  const meta = new Ajv2020({ strict: false });
  const schemas = Object.entries(document.paths).flatMap(([path, operations]) =>
    Object.entries(operations).flatMap(([method, operation]) => [
      ...(operation.parameters ?? []).map((parameter) => [`${method} ${path} ${parameter.name}`, parameter.schema] as const),
      ...(operation.requestBody ? [[`${method} ${path} body`, operation.requestBody.content['application/json'].schema] as const] : []),
      ...Object.entries(operation.responses).flatMap(([status, response]) =>
        '$ref' in response || !response.content ? [] : [[`${method} ${path} ${status}`, response.content['application/json']!.schema] as const],
      ),
    ]),
  );
  t.ok(schemas.length > 300, `${schemas.length} schemas`);
  const invalid = schemas.filter(([, schema]) => !meta.validateSchema(schema)).map(([where]) => where);
  t.same(invalid, [], 'every schema is valid JSON Schema 2020-12');
});

t.test('real responses validate against the document, and a wrong one does not', async (t) => {
  const { call, request } = await startTestApp(t);
  const document = (await request({ method: 'GET', url: '/openapi.json' })).json() as OpenApiDocument;
  const problems = responseValidator(document);
  const check = (method: string, url: string, answer: { statusCode: number; json(): unknown }, status: number) => {
    t.equal(answer.statusCode, status, `${method} ${url} answers ${status}`);
    t.same(problems(method, url, answer.statusCode, answer.json()), [], `${method} ${url} ${status} matches the document`);
  };

  const issued = await call(
    'POST',
    '/v3/auth/tokens',
    { auth: { identity: { methods: ['password'], password: { user: { name: 'admin', domain: { id: 'default' }, password: 'admin-secret' } } }, scope: { project: { name: 'admin', domain: { id: 'default' } } } } },
    null,
  );
  check('POST', '/v3/auth/tokens', issued, 201);
  const token = issued.json() as { token: { project: { id: string }; expires_at?: string } };
  check('GET', '/v3/users', await call('GET', '/v3/users'), 200);
  check('GET', '/v3/projects/:project_id', await call('GET', `/v3/projects/${token.token.project.id}`), 200);
  check('GET', '/v3/auth/catalog', await call('GET', '/v3/auth/catalog'), 200);
  check('GET', '/v3/projects/:project_id', await call('GET', '/v3/projects/no-such-project'), 404);
  check('GET', '/v3/users', await call('GET', '/v3/users', undefined, 'not-a-token'), 401);
  check('GET', '/', await request({ method: 'GET', url: '/' }), 300);

  // The validator can fail: a token without its expiry, a project without its id, an error without its message.
  const withoutExpiry = structuredClone(token);
  delete withoutExpiry.token.expires_at;
  t.not(problems('POST', '/v3/auth/tokens', 201, withoutExpiry).length, 0, 'a token body missing a required field fails');
  const project = (await call('GET', `/v3/projects/${token.token.project.id}`)).json() as { project: Record<string, unknown> };
  delete project.project.id;
  t.not(problems('GET', '/v3/projects/:project_id', 200, project).length, 0, 'a project missing its id fails');
  t.not(problems('GET', '/v3/projects/:project_id', 404, { error: { code: 404, title: 'Not Found' } }).length, 0, 'an error envelope missing its message fails');
});

t.test('the browsable page, and the gateway leaves both paths to the identity API', async (t) => {
  const { app, request } = await startTestApp(t);
  const page = await request({ method: 'GET', url: '/api-docs' });
  t.equal(page.statusCode, 200, 'no token needed');
  t.match(page.headers['content-type'], /^text\/html/);
  t.match(page.headers['content-security-policy'], /default-src 'none'/, 'nothing loaded from elsewhere');
  t.match(page.body, /<a href="openapi.json">/);
  t.match(page.body, /<span class="method">POST<\/span> <code>\/v3\/auth\/tokens<\/code>/);
  t.match(page.body, /<code>\/v3\/gateway\/policy\/explain<\/code>/);
  t.notMatch(page.body, /<script/i);

  // The gateway takes /{service_type}/…: these segments are the identity API's on the real server.
  await app.server.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.server.address() as net.AddressInfo;
  for (const url of ['/openapi.json', '/api-docs', '/identity/openapi.json', '/identity/api-docs']) {
    t.equal((await fetch(`http://127.0.0.1:${port}${url}`)).status, 200, url);
  }
  // Under the /identity mount (stripped by the server, not by inject), the server says so.
  const mounted = (await (await fetch(`http://127.0.0.1:${port}/identity/openapi.json`)).json()) as { servers: unknown };
  t.same(mounted.servers, [{ url: `${PUBLIC_URL}/identity` }]);
  // A new path under /v3 stays a clean 404.
  t.equal((await request({ method: 'GET', url: '/v3/openapi.json', headers: { 'x-auth-token': 'x' } })).statusCode, 404);
});

t.test('the builder: status keys, undeclared responses, and routes it refuses', async (t) => {
  const document = buildOpenApiDocument(
    [
      { method: 'GET', url: '/v3/things/:thing_id', public: false, schema: { response: { '2xx': { type: 'object' }, default: { type: 'object' } } } },
      { method: 'HEAD', url: '/v3/things/:thing_id', public: false, schema: { response: { 200: { type: 'object' } } } },
      { method: 'DELETE', url: '/v3/things/:thing_id', public: true },
    ],
    'v0',
  );
  const operations = document.paths['/v3/things/{thing_id}']!;
  t.same(Object.keys(operations.get!.responses).sort(), ['2XX', '4XX', '5XX', 'default'], "fastify's 2xx is OpenAPI's 2XX");
  t.notOk('content' in operations.head!.responses['200']!, 'a HEAD answer has no body');
  t.same(operations.delete!.responses['2XX'], { description: 'Success; the route declares no response schema.' });
  t.same(operations.delete!.security, []);
  t.throws(() => buildOpenApiDocument([{ method: 'GET', url: '/a', public: true }, { method: 'GET', url: '/a', public: true }], 'v0'), /registered twice/);
  t.throws(() => buildOpenApiDocument([{ method: 'CONNECT', url: '/a', public: true }], 'v0'), /no method CONNECT/);
});
