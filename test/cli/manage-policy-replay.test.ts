import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { ECHO_RULES, gatewayWorld } from '../helpers/gateway.ts';
import { manage } from '../helpers/manage.ts';
import { rawRequest } from '../helpers/upstream.ts';

// `manage policy replay --candidate DIR` against a running deployment.

const READER_DENIED = 'p, reader, project, /v1/{project_id}/things, GET, deny';

t.test('policy replay --candidate DIR lists the recorded requests the candidate would change', async (t) => {
  const w = await gatewayWorld(t);
  const listed = await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': w.reader } });
  t.equal(listed.status, 200);
  const requestId = String(listed.headers['x-openstack-request-id']);
  const candidate = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-candidate-'));
  t.teardown(() => fs.rmSync(candidate, { recursive: true, force: true }));
  fs.writeFileSync(path.join(candidate, 'echo.csv'), `${ECHO_RULES}${READER_DENIED}\n`);
  const url = `http://127.0.0.1:${w.port}`;

  const text = await manage(['policy', 'replay', '--candidate', candidate, '--url', url], { OS_TOKEN: w.admin });
  t.equal(text.code, 0, text.stderr);
  t.match(text.stdout, '1 recorded decisions replayed; 1 would change');
  t.match(text.stdout, `${requestId}  GET /echo/v1/${w.projectId}/things  allow -> deny  (echo.csv:7  ${READER_DENIED})`);

  const json = await manage(['policy', 'replay', '--candidate', candidate, '--url', url, '--json'], { OS_TOKEN: w.admin });
  t.equal(json.code, 0, json.stderr);
  t.match(JSON.parse(json.stdout), { decisions: 1, changed: [{ request_id: requestId, live: 'allow', candidate: 'deny' }] });

  // A fixture the candidate brings along gates it (a live one of the same name is replaced).
  fs.mkdirSync(path.join(candidate, 'tests'));
  fs.writeFileSync(
    path.join(candidate, 'tests', 'echo.yaml'),
    `- name: a reader may list things\n  service: echo\n  roles: [reader]\n  scope: project\n  project_id: p1\n  method: GET\n  path: /v1/p1/things\n  expect: allow\n`,
  );
  const gated = await manage(['policy', 'replay', '--candidate', candidate, '--url', url], { OS_TOKEN: w.admin });
  t.equal(gated.code, 1, 'the candidate fails its own fixture');
  t.match(gated.stderr, /replay refused \(400\): .*tests\/echo\.yaml: case 1 "a reader may list things": expected allow, got deny/);
  fs.rmSync(path.join(candidate, 'tests'), { recursive: true });

  fs.writeFileSync(path.join(candidate, 'echo.csv'), `${ECHO_RULES}p, reader\n`);
  const broken = await manage(['policy', 'replay', '--candidate', candidate, '--url', url], { OS_TOKEN: w.admin });
  t.equal(broken.code, 1);
  t.match(broken.stderr, /replay refused \(400\): .*echo\.csv:7/);

  const forbidden = await manage(['policy', 'replay', '--candidate', candidate, '--url', url], { OS_TOKEN: w.reader });
  t.equal(forbidden.code, 1);
  t.match(forbidden.stderr, /replay refused \(403\)/);

  const noToken = await manage(['policy', 'replay', '--candidate', candidate, '--url', url], { OS_TOKEN: '' });
  t.equal(noToken.code, 2);
  t.match(noToken.stderr, /OS_TOKEN/);
  t.equal((await manage(['policy', 'replay', '--url', url], { OS_TOKEN: w.admin })).code, 2, 'no --candidate');
});
