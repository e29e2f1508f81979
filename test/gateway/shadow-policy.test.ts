import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { pino } from 'pino';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { ECHO_RULES, gatewayWorld, type World } from '../helpers/gateway.ts';
import { eventually } from '../helpers/keystone-client.ts';
import { ROOT } from '../helpers/processes.ts';
import { rawRequest } from '../helpers/upstream.ts';

// POLICY_SHADOW_DIR: a second policy decided for every proxied request, never enforced; where it
// disagrees with the live one, the audit line says so and a metric counts it.

const READER_DENIED = 'p, reader, project, /v1/{project_id}/things, GET, deny';
/** The live rules, and a reader may no longer list things. */
const STRICTER = `${ECHO_RULES}${READER_DENIED}\n`;
const FIXTURE = `- name: a reader may not list things
  service: echo
  roles: [reader]
  scope: project
  project_id: p1
  user_id: u1
  method: GET
  path: /v1/p1/things
  expect: deny
`;

function shadowDirectory(t: { teardown(fn: () => unknown): void }, rules: string): string {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-shadow-'));
  t.teardown(() => fs.rmSync(directory, { recursive: true, force: true }));
  fs.copyFileSync(path.join(ROOT, 'policies', 'model.conf'), path.join(directory, 'model.conf'));
  fs.writeFileSync(path.join(directory, 'echo.csv'), rules);
  fs.mkdirSync(path.join(directory, 'tests'));
  fs.writeFileSync(path.join(directory, 'tests', 'echo.yaml'), FIXTURE);
  return directory;
}

async function scrape(w: World): Promise<string> {
  const response = await w.testApp.request({ method: 'GET', url: '/metrics' });
  if (response.statusCode !== 200) throw new Error(`GET /metrics: ${response.statusCode}`);
  return response.body;
}

/** The value of one sample line of the exposition, 0 when absent. */
function sample(text: string, series: string): number {
  const line = text.split('\n').find((entry) => entry.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

const DISAGREEMENT = 'keystone_gateway_shadow_decisions_total{service="echo",live="allow",shadow="deny"}';

function auditsOf(lines: string[]): Record<string, unknown>[] {
  return lines.map((line) => JSON.parse(line)).filter((entry) => entry.msg === 'gateway').map((entry) => entry.audit);
}

t.test('a stricter shadow policy changes nothing for clients; its disagreements are audited and counted', async (t) => {
  const lines: string[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
  const shadow = shadowDirectory(t, STRICTER);
  const w = await gatewayWorld(t, { POLICY_SHADOW_DIR: shadow }, { logger });
  const before = await scrape(w);
  t.equal(sample(before, DISAGREEMENT), 0);
  lines.length = 0;
  w.upstream.received.length = 0;

  const listed = await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': w.reader } });
  t.equal(listed.status, 200, 'the live policy allows: the client is answered by the upstream');
  t.equal(w.upstream.received.length, 1, 'the upstream received the request');
  const created = await rawRequest(w.port, { method: 'POST', path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': w.member, 'content-type': 'application/json' }, body: '{}' });
  t.equal(created.status, 201, 'both policies allow');
  const refused = await rawRequest(w.port, { method: 'POST', path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': w.reader, 'content-type': 'application/json' }, body: '{}' });
  t.equal(refused.status, 403, 'both policies deny: still refused');
  t.equal(w.upstream.received.length, 2);

  const audits = auditsOf(lines);
  t.equal(audits.length, 3);
  t.match(audits[0], { effect: 'allow', rule: 'p, reader, project, /v1/{project_id}/things, GET, allow', status: 200, shadow: { effect: 'deny', rule: READER_DENIED } });
  t.notOk('shadow' in audits[1]!, 'agreement (allow): no shadow field');
  t.notOk('shadow' in audits[2]!, 'agreement (deny): no shadow field');

  const after = await scrape(w);
  t.equal(sample(after, DISAGREEMENT), 1, 'the disagreement is counted with service, live and shadow labels');
  t.notOk(after.includes('keystone_gateway_shadow_decisions_total{service="echo",live="allow",shadow="allow"}'), 'agreements are not counted');
  t.notOk(after.includes('keystone_gateway_shadow_decisions_total{service="echo",live="deny"'), 'nor is a shared deny');
  t.match(after, /keystone_gateway_cache_requests_total\{cache="policy_shadow_decision",result="miss"\} [1-9]/, 'the shadow has its own decision cache');

  // The same request again: the shadow answers from its cache, with the same disagreement.
  lines.length = 0;
  t.equal((await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': w.reader } })).status, 200);
  t.match(auditsOf(lines)[0], { shadow: { effect: 'deny', rule: READER_DENIED } });
  const cached = await scrape(w);
  t.equal(sample(cached, DISAGREEMENT), 2);
  t.ok(sample(cached, 'keystone_gateway_cache_requests_total{cache="policy_shadow_decision",result="hit"}') >= 1, 'a shadow cache hit');
});

t.test('the shadow is hot-reloaded, gated by its fixtures: a failing set is not loaded and the previous shadow stays', async (t) => {
  const lines: string[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
  const shadow = shadowDirectory(t, STRICTER);
  const w = await gatewayWorld(t, { POLICY_SHADOW_DIR: shadow }, { logger });
  const reloads = (text: string, result: string) => sample(text, `keystone_gateway_policy_reloads_total{policy="gateway_shadow",result="${result}"}`);
  const list = () => rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': w.reader } });

  // Rules that allow the reader again contradict the fixture (expect: deny): refused.
  fs.writeFileSync(path.join(shadow, 'echo.csv'), ECHO_RULES);
  t.ok(await eventually(async () => reloads(await scrape(w), 'failure') >= 1, 10_000), 'the reload was rejected');
  t.equal(reloads(await scrape(w), 'success'), 0);
  t.ok(lines.some((line) => line.includes('gateway shadow policy reload rejected')), 'and logged');
  lines.length = 0;
  t.equal((await list()).status, 200);
  t.match(auditsOf(lines)[0], { shadow: { effect: 'deny', rule: READER_DENIED } }, 'the previous shadow still decides');

  // A set that passes its fixtures replaces it: a deny by another line.
  const other = 'p, reader, project, /v1/{project_id}/**, GET, deny';
  fs.writeFileSync(path.join(shadow, 'echo.csv'), `${ECHO_RULES}${other}\n`);
  t.ok(await eventually(async () => reloads(await scrape(w), 'success') >= 1, 10_000), 'the reload was accepted');
  lines.length = 0;
  t.equal((await list()).status, 200);
  t.match(auditsOf(lines)[0], { shadow: { effect: 'deny', rule: other } }, 'the new shadow decides');
});

t.test('shadow off: no shadow field, no shadow series', async (t) => {
  const lines: string[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
  const w = await gatewayWorld(t, {}, { logger });
  lines.length = 0;
  t.equal((await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': w.reader } })).status, 200);
  t.equal((await rawRequest(w.port, { method: 'POST', path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': w.reader } })).status, 403);
  const gatewayLines = lines.filter((line) => JSON.parse(line).msg === 'gateway');
  t.equal(gatewayLines.length, 2);
  for (const line of gatewayLines) t.notOk(line.includes('shadow'), 'no shadow field in the audit line');
  const metrics = await scrape(w);
  t.notOk(metrics.includes('keystone_gateway_shadow_decisions_total{'), 'no shadow samples');
  t.notOk(metrics.includes('policy_shadow_decision'), 'no shadow cache');
});

t.test('a shadow that fails to load stops the start, as the live policy does', async (t) => {
  const shadow = shadowDirectory(t, `${ECHO_RULES}p, reader\n`);
  await t.rejects(gatewayWorld(t, { POLICY_SHADOW_DIR: shadow }), /echo\.csv:\d+/);
  const failing = shadowDirectory(t, ECHO_RULES);
  await t.rejects(gatewayWorld(t, { POLICY_SHADOW_DIR: failing }), /fixture/);
});

t.test('POLICY_SHADOW_DIR: optional, never the live directory', async (t) => {
  t.equal(loadConfig({}).policyShadowDirectory, undefined);
  t.equal(loadConfig({ POLICY_SHADOW_DIR: '' }).policyShadowDirectory, undefined);
  t.equal(loadConfig({ POLICY_DIR: '/etc/kg/policies', POLICY_SHADOW_DIR: '/etc/kg/shadow' }).policyShadowDirectory, '/etc/kg/shadow');
  t.throws(() => loadConfig({ POLICY_DIR: '/etc/kg/policies', POLICY_SHADOW_DIR: '/etc/kg/policies/' }), ConfigError);
  t.same(loadConfig({}).gatewayDecisions, { kept: 10_000, ttlSeconds: 86_400, keyPrefix: 'keystone-gateway:decision:' });
  t.throws(() => loadConfig({ GATEWAY_DECISIONS_KEPT: 'many' }), ConfigError);
  t.throws(() => loadConfig({ GATEWAY_DECISIONS_TTL_SECONDS: '0' }), ConfigError);
});
