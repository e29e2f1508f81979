import t from 'tap';
import { ADMIN_PASSWORD, startTestApp } from '../helpers/app.ts';
import { buildMatrixWorld, expectedVerdict, IdentityClient, OWN_ROWS, PERSONAS, PROTECTION_MATRIX, runCell, uncoveredRoutes } from '../helpers/protection-matrix.ts';

// Every identity route family × persona, from the one table in test/helpers/protection-matrix.ts:
// Keystone 22's default policy, as policies/identity/ expresses it.
// ~1,100 real HTTP requests: more than the default file timeout on a loaded machine.
t.setTimeout(600_000);
t.test('the identity API protection matrix', async (t) => {
  const { app } = await startTestApp(t);
  // The rows are checked against the routes the service registered, so a new route cannot be left out.
  t.ok(app.routes.length > 150, `${app.routes.length} routes registered`);
  t.same(uncoveredRoutes(app.routes), [], 'every route has a matrix row or is public by design');
  await app.server.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.server.address();
  const client = new IdentityClient(`http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`);
  const world = await buildMatrixWorld(client, 'admin', ADMIN_PASSWORD);
  for (const row of [...PROTECTION_MATRIX, ...OWN_ROWS]) {
    for (const persona of PERSONAS) {
      const { verdict, answer } = await runCell(world, row, persona);
      const expected = expectedVerdict(row, persona);
      t.equal(verdict, expected, `${row.method} ${row.path}${row.subject ? ` (${row.subject} token)` : ''} as ${persona}${verdict === expected ? '' : `: ${answer.status} ${JSON.stringify(answer.body)}`}`);
      if (answer.status >= 500) t.fail(`${row.method} ${row.path} as ${persona}: server error ${answer.status}`);
    }
  }
});
