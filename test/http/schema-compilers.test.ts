import t from 'tap';
import { Type } from 'typebox';
import { SchemaCompilers } from '../../src/http/schema-compilers.ts';
import { one } from '../../src/http/schemas.ts';
import { startTestApp } from '../helpers/app.ts';

const Entity = Type.Object({ id: Type.String(), enabled: Type.Boolean() });
const route = (schema: object) => ({ schema, method: 'GET', url: '/x', httpStatus: '200' }) as never;

t.test('a response schema is compiled once for every route whose schema has the same JSON', async (t) => {
  const compilers = new SchemaCompilers();
  const first = compilers.serializer(route(one('thing', Entity)));
  // A new object with the same content (as each route's `one(...)` makes): the same serializer.
  t.equal(compilers.serializer(route(one('thing', Entity))), first);
  // Other content: its own.
  const other = compilers.serializer(route(one('other', Entity)));
  t.not(other, first);
  // What fast-json-stringify does with the schema: declared properties only, typed.
  t.equal(first({ thing: { id: 'a', enabled: true, secret: 'x' } }), '{"thing":{"id":"a","enabled":true}}');
  t.equal(other({ other: { id: 'b', enabled: false } }), '{"other":{"id":"b","enabled":false}}');
});

t.test('a request schema is compiled once per schema object, and checks as compileValidator does', async (t) => {
  const compilers = new SchemaCompilers();
  const validator = compilers.validator({ schema: Entity, method: 'POST', url: '/x', httpPart: 'body' });
  t.equal(compilers.validator({ schema: Entity, method: 'PATCH', url: '/y', httpPart: 'body' }), validator);
  t.not(compilers.validator({ schema: Type.Object({ id: Type.String(), enabled: Type.Boolean() }), method: 'POST', url: '/x', httpPart: 'body' }), validator);
  t.equal(validator({ id: 'a', enabled: true }), true);
  const refused = validator({ id: 'a', enabled: 'yes' }) as { error: unknown[] };
  t.ok(Array.isArray(refused.error) && refused.error.length > 0, 'a body that does not match is refused with its errors');
});

t.test('applications built with one SchemaCompilers answer as with their own', async (t) => {
  // The test helper shares one per process (test/helpers/app.ts): the second app's routes use the
  // first one's compiled schemas, and both still serialize and validate.
  for (const _ of [1, 2]) {
    const app = await startTestApp(t);
    const created = await app.call('POST', '/v3/domains', { domain: { name: `d-${_}`, enabled: 'yes' } });
    t.equal(created.statusCode, 400, 'a body that fails its schema is refused');
    const ok = await app.call('POST', '/v3/domains', { domain: { name: `d-${_}` } });
    t.equal(ok.statusCode, 201);
    const domain = ok.json().domain;
    t.same(Object.keys(domain).sort(), ['description', 'enabled', 'id', 'links', 'name', 'options', 'tags'].sort());
    await app.close();
  }
});
