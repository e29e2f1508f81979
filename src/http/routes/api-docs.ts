import { UnavailableError } from '../../support/errors.ts';
import type { App } from '../context.ts';
import { baseUrl } from '../links.ts';
import { buildOpenApiDocument, type DocumentedRoute, type OpenApiDocument } from '../openapi.ts';
import { IDENTITY_API_VERSION } from './discovery.ts';

/** Where the document and its page are served (outside /v3, whose unknown paths must stay 404s). */
export const OPENAPI_PATH = '/openapi.json';
export const API_DOCS_PATH = '/api-docs';

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (character) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[character]!);

const schemaBlock = (schema: unknown) => `<pre>${escapeHtml(JSON.stringify(schema, null, 2))}</pre>`;

/**
 * The document as a page: each operation a <details> with its parameters, body and responses.
 * Rendered once on the server, no script and nothing fetched from elsewhere (machines running the
 * service may have no internet, and the page's CSP forbids it anyway).
 */
export function renderApiDocsPage(document: OpenApiDocument): string {
  const sections = document.tags.map(({ name }) => {
    const operations = Object.entries(document.paths).flatMap(([path, operations]) =>
      Object.entries(operations)
        .filter(([, operation]) => operation.tags.includes(name))
        .map(([method, operation]) => {
          const parameters = (operation.parameters ?? [])
            .map((parameter) => `<li><code>${escapeHtml(parameter.name)}</code> (${parameter.in}${parameter.required ? ', required' : ''}) ${schemaBlock(parameter.schema)}</li>`)
            .join('');
          const body = operation.requestBody ? `<h4>Request body</h4>${schemaBlock(operation.requestBody.content['application/json'].schema)}` : '';
          const responses = Object.entries(operation.responses)
            .map(([status, response]) => {
              const content = '$ref' in response ? `see <code>${escapeHtml(response.$ref)}</code>` : escapeHtml(response.description);
              const schema = '$ref' in response || !response.content ? '' : schemaBlock(response.content['application/json']!.schema);
              return `<details><summary>${escapeHtml(status)}: ${content}</summary>${schema}</details>`;
            })
            .join('');
          const access = operation.security.length === 0 ? 'public' : 'X-Auth-Token';
          return (
            `<details class="operation"><summary><span class="method">${method.toUpperCase()}</span> <code>${escapeHtml(path)}</code> <small>${access}</small></summary>` +
            (parameters ? `<h4>Parameters</h4><ul>${parameters}</ul>` : '') +
            body +
            `<h4>Responses</h4>${responses}</details>`
          );
        }),
    );
    return `<section><h2>${escapeHtml(name)}</h2>${operations.join('')}</section>`;
  });
  const errorSchema = schemaBlock(document.components.schemas['Error']);
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(document.info.title)} API</title>
<style>body{font-family:sans-serif;margin:2em;max-width:70em}summary{cursor:pointer}pre{background:#f4f4f4;padding:.5em;overflow:auto;font-size:85%}
.operation{border-bottom:1px solid #ddd;padding:.3em 0}.method{display:inline-block;min-width:4.5em;font-weight:bold;font-family:monospace}small{color:#666}</style></head>
<body><h1>${escapeHtml(document.info.title)} ${escapeHtml(document.info.version)}</h1><p>${escapeHtml(document.info.description)}</p>
<p>The OpenAPI 3.1 document: <a href="openapi.json">openapi.json</a>. Routes marked X-Auth-Token need a token; every 4XX and 5XX answer is the error envelope:</p>${errorSchema}
${sections.join('\n')}
</body></html>`;
}

/**
 * GET /openapi.json and GET /api-docs: public, like version discovery. Both are built once when the
 * server is ready (every route registered by then), from `routes`, the list the identity API fills.
 */
export function registerApiDocsRoutes(app: App, routes: readonly DocumentedRoute[]): void {
  let published: { json: string; html: string } | undefined;
  app.addHook('onReady', async () => {
    const document = buildOpenApiDocument(routes, IDENTITY_API_VERSION);
    published = { json: JSON.stringify(document), html: renderApiDocsPage(document) };
  });
  // fastify serves no request before onReady has run; should one come, it is a 503, not a 500.
  const ready = () => {
    if (!published) throw new UnavailableError('The API description is not built yet. Retry later.', 1);
    return published;
  };

  app.get(OPENAPI_PATH, { config: { public: true } }, async (request, reply) => {
    // The server is where this request came (a mount such as /identity included): spliced in, so
    // the document itself is serialised once.
    const servers = JSON.stringify([{ url: baseUrl(request) || '/' }]);
    return reply.type('application/json; charset=utf-8').send(`{"servers":${servers},${ready().json.slice(1)}`);
  });

  app.get(API_DOCS_PATH, { config: { public: true } }, async (_request, reply) =>
    reply
      .type('text/html; charset=utf-8')
      .header('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'")
      .header('X-Content-Type-Options', 'nosniff')
      .send(ready().html),
  );
}
