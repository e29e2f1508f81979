import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { manage } from '../helpers/manage.ts';

const root = path.resolve(import.meta.dirname, '../..');
const shippedPolicies = path.join(root, 'policies');
const model = fs.readFileSync(path.join(shippedPolicies, 'model.conf'), 'utf8');

/** A policy directory with the shipped model.conf and `files`; removed after the test. */
function policyDirectory(t: { teardown(fn: () => void): void }, files: Record<string, string>): string {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-manage-policy-'));
  t.teardown(() => fs.rmSync(directory, { recursive: true, force: true }));
  for (const [name, content] of Object.entries({ 'model.conf': model, ...files })) {
    fs.mkdirSync(path.dirname(path.join(directory, name)), { recursive: true });
    fs.writeFileSync(path.join(directory, name), content);
  }
  return directory;
}

const demoRules = ['# demo', 'p, reader, *, /things, GET, allow', 'p, member, project, /v1/{project_id}/things/*, *, allow', 'p, *, project, /v1/*/things/locked, *, deny', ''].join('\n');

function demoCase(name: string, method: string, requestPath: string, expect: 'allow' | 'deny'): string {
  return [`- name: ${name}`, '  service: demo', '  roles: [member, reader]', '  scope: project', '  project_id: p-1', `  method: ${method}`, `  path: ${requestPath}`, `  expect: ${expect}`, ''].join('\n');
}

// Each case runs its own processes on its own directory, so cases may run side by side.
const parallel = { jobs: 4 };

t.test('policy test', parallel, async (t) => {
  t.test('identity rules in DIR/identity are tested too', async (t) => {
    const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-manage-policy-'));
    t.teardown(() => fs.rmSync(directory, { recursive: true, force: true }));
    fs.cpSync(shippedPolicies, directory, { recursive: true });
    const rules = path.join(directory, 'identity', 'identity.csv');
    // Drop the line that lets a user read itself: a shipped fixture expects it.
    fs.writeFileSync(rules, fs.readFileSync(rules, 'utf8').replace('p, *, *, identity:get_user, self, allow\n', ''));
    const result = await manage(['policy', 'test', directory]);
    t.equal(result.code, 1);
    t.match(result.stdout, /^FAIL identity\/tests\/keystone-defaults\.yaml: case \d+ "a user reads itself": expected allow, got deny/m);
    t.match(result.stdout, /\d+ passed, 1 failed\n$/);
  });

  t.test('the shipped policies pass (default directory)', async (t) => {
    const result = await manage(['policy', 'test']);
    t.equal(result.code, 0, result.stderr);
    t.match(result.stdout, /^\d+ passed, 0 failed\n$/);
    t.notMatch(result.stdout, /^\s*0 passed/, 'cases ran');
  });

  t.test('POLICY_DIR is the default directory; a DIR argument wins over it', async (t) => {
    const failing = policyDirectory(t, { 'demo.csv': demoRules, 'tests/demo.yaml': demoCase('wrong', 'GET', '/things', 'deny') });
    const viaEnvironment = await manage(['policy', 'test'], { POLICY_DIR: failing });
    t.equal(viaEnvironment.code, 1);
    // The failing gateway case, plus the (passing) identity fixtures of IDENTITY_POLICY_DIR.
    t.match(viaEnvironment.stdout, /^FAIL tests\/demo\.yaml: case 1 "wrong"/m);
    t.match(viaEnvironment.stdout, /\d+ passed, 1 failed/);
    const viaArgument = await manage(['policy', 'test', shippedPolicies], { POLICY_DIR: failing });
    t.equal(viaArgument.code, 0, viaArgument.stdout);
  });

  t.test('one line per failure and a summary; exit 1', async (t) => {
    const directory = policyDirectory(t, {
      'demo.csv': demoRules,
      'tests/demo.yaml':
        demoCase('reader lists things', 'GET', '/things', 'allow') +
        demoCase('member deletes own thing', 'DELETE', '/v1/p-1/things/t-1', 'allow') +
        demoCase('wrongly expects another project', 'GET', '/v1/p-2/things/t-1', 'allow') +
        demoCase('wrongly expects the locked thing', 'GET', '/v1/p-1/things/locked', 'allow'),
    });
    const result = await manage(['policy', 'test', directory]);
    t.equal(result.code, 1);
    const lines = result.stdout.trimEnd().split('\n');
    t.equal(lines.length, 3, result.stdout);
    t.match(lines[0], /^FAIL tests\/demo\.yaml: case 3 "wrongly expects another project": expected allow, got deny \(no rule allows/);
    t.match(lines[1], /^FAIL tests\/demo\.yaml: case 4 "wrongly expects the locked thing": expected allow, got deny \(denied by rule, decided by "p, \*, project, \/v1\/\*\/things\/locked, \*, deny" \(demo\.csv:4\)\)/);
    t.equal(lines[2], '2 passed, 2 failed');
  });

  t.test('a load error prints file:line and exits 1', async (t) => {
    const directory = policyDirectory(t, { 'demo.csv': '# demo\np, reader, *, /things, GET, allow\np, reader, everywhere, /x, GET, allow\n' });
    const result = await manage(['policy', 'test', directory]);
    t.equal(result.code, 1);
    t.match(result.stderr, `${path.join(directory, 'demo.csv')}:3: unknown scope 'everywhere'`);
    t.equal(result.stdout, '');
  });

  t.test('a missing directory is a load error', async (t) => {
    const result = await manage(['policy', 'test', path.join(os.tmpdir(), 'kg-no-such-policy-directory')]);
    t.equal(result.code, 1);
    t.match(result.stderr, /model\.conf: cannot read/);
  });

  t.test('bad arguments exit 2 with the usage', async (t) => {
    const twoDirectories = await manage(['policy', 'test', 'a', 'b']);
    t.equal(twoDirectories.code, 2);
    t.match(twoDirectories.stderr, /at most one directory/);
    t.match(twoDirectories.stderr, /Usage:/);
    const unknownOption = await manage(['policy', 'test', '--verbose']);
    t.equal(unknownOption.code, 2);
    t.match(unknownOption.stderr, /Unknown option '--verbose'/);
  });
});

t.test('policy explain', parallel, async (t) => {
  const base = ['policy', 'explain', '--service', 'compute', '--scope', 'project', '--project-id', 'p-1', '--user-id', 'u-1'];

  t.test('an allow names the deciding line and every matching line', async (t) => {
    const result = await manage([...base, '--method', 'GET', '--path', '/v2.1/p-1/servers', '--roles', 'member,reader']);
    t.equal(result.code, 0, result.stderr);
    t.match(result.stdout, /^decision: allow \(allowed\)$/m);
    t.match(result.stdout, /^deciding rule: p, reader, project, \/v2\.1\/\{project_id\}\/servers, GET, allow {2}\(compute\.csv:\d+\)$/m);
    t.match(result.stdout, /^matching lines: 2$/m);
    t.match(result.stdout, /^ {2}allow {2}compute\.csv:\d+ {2}p, member, project, \/v2\.1\/\{project_id\}\/servers, GET, allow$/m);
  });

  t.test('a deny exits 0 too, naming the deny line and the allow it beat', async (t) => {
    const result = await manage([...base, '--method', 'GET', '--path', '/v2.1/p-1/os-hypervisors/detail', '--roles', 'admin,member,reader']);
    t.equal(result.code, 0, result.stderr);
    t.match(result.stdout, /^decision: deny \(denied by rule\)$/m);
    t.match(result.stdout, /^deciding rule: p, \*, project, \/v2\.1\/\*\/os-hypervisors\/\*\*, \*, deny {2}\(compute\.csv:\d+\)$/m);
    t.match(result.stdout, /^ {2}allow {2}compute\.csv:\d+ {2}p, admin, \*, \/\*\*, \*, allow$/m);
    t.match(result.stdout, /^ {2}deny {3}compute\.csv:\d+ {2}p, \*, project, \/v2\.1\/\*\/os-hypervisors\/\*\*, \*, deny$/m);
  });

  t.test("another project's id is denied with no matching line", async (t) => {
    const result = await manage([...base, '--method', 'get', '--path', '/v2.1/p-2/servers', '--roles', 'member,reader']);
    t.equal(result.code, 0, result.stderr);
    t.match(result.stdout, /^request: GET \/v2\.1\/p-2\/servers on compute;/m, 'the method is upper-cased');
    t.match(result.stdout, /^decision: deny \(no rule allows\)$/m);
    t.match(result.stdout, /^deciding rule: none$/m);
    t.match(result.stdout, /^matching lines: 0$/m);
  });

  t.test('--json and --dir', async (t) => {
    const directory = policyDirectory(t, { 'demo.csv': demoRules });
    const result = await manage([
      'policy', 'explain', '--dir', directory, '--json',
      '--service', 'demo', '--method', 'DELETE', '--path', '/v1/p-1/things/locked', '--roles', 'member', '--scope', 'project', '--project-id', 'p-1',
    ]);
    t.equal(result.code, 0, result.stderr);
    const explanation = JSON.parse(result.stdout) as Record<string, unknown>;
    t.same(explanation, {
      request: { service: 'demo', roles: ['member'], scope: 'project', projectId: 'p-1', userId: '', method: 'DELETE', path: '/v1/p-1/things/locked' },
      allowed: false,
      reason: 'denied by rule',
      rule: 'p, *, project, /v1/*/things/locked, *, deny',
      source: 'demo.csv',
      line: 4,
      matches: [
        { rule: 'p, member, project, /v1/{project_id}/things/*, *, allow', source: 'demo.csv', line: 3, effect: 'allow' },
        { rule: 'p, *, project, /v1/*/things/locked, *, deny', source: 'demo.csv', line: 4, effect: 'deny' },
      ],
    });
  });

  t.test('an unknown service is a deny that lists the known services', async (t) => {
    const result = await manage(['policy', 'explain', '--service', 'nova', '--method', 'GET', '--path', '/', '--scope', 'system']);
    t.equal(result.code, 0, result.stderr);
    t.match(result.stdout, /^decision: deny \(unknown service\)$/m);
    t.match(result.stdout, /^known services: compute, placement$/m);
  });

  t.test('a load error exits 1 with file:line', async (t) => {
    const directory = policyDirectory(t, { 'demo.csv': '# demo\np, reader, *, /things, get, allow\n' });
    const result = await manage(['policy', 'explain', '--service', 'demo', '--method', 'GET', '--path', '/things', '--scope', 'system'], { POLICY_DIR: directory });
    t.equal(result.code, 1);
    t.match(result.stderr, `${path.join(directory, 'demo.csv')}:2: unknown method 'get'`);
  });

  t.test('bad arguments exit 2 with the usage', async (t) => {
    const cases: { args: string[]; message: RegExp }[] = [
      { args: ['--method', 'GET', '--path', '/', '--scope', 'system'], message: /--service is required/ },
      { args: ['--service', 'compute', '--path', '/', '--scope', 'system'], message: /--method is required/ },
      { args: ['--service', 'compute', '--method', 'GET', '--scope', 'system'], message: /--path is required/ },
      { args: ['--service', 'compute', '--method', 'GET', '--path', '/'], message: /--scope is required/ },
      { args: ['--service', 'compute', '--method', 'GET', '--path', 'v2.1', '--scope', 'system'], message: /--path must start with '\/'/ },
      { args: ['--service', 'compute', '--method', 'GET', '--path', '/', '--scope', 'tenant'], message: /--scope must be project, domain or system/ },
      { args: ['--service', 'compute', '--method', 'GET', '--path', '/', '--scope', 'domain', '--project-id', 'p'], message: /--project-id needs --scope project/ },
      { args: ['--service', 'compute', '--method', 'GET', '--path', '/', '--scope', 'system', '--role', 'admin'], message: /Unknown option '--role'/ },
      { args: ['--service', 'compute', '--method', 'GET', '--path', '/', '--scope', 'system', 'extra'], message: /positional argument/ },
      { args: ['--service'], message: /argument missing|requires? (an )?argument/i },
    ];
    // Independent processes: run them side by side.
    const results = await Promise.all(cases.map(({ args }) => manage(['policy', 'explain', ...args])));
    for (const [index, { args, message }] of cases.entries()) {
      const result = results[index]!;
      t.equal(result.code, 2, args.join(' '));
      t.match(result.stderr, message, args.join(' '));
      t.match(result.stderr, /Usage:\n {2}npm run manage -- policy test/, 'usage follows');
      t.equal(result.stdout, '');
    }
  });
});

t.test('policy without a subcommand, and the usage text', async (t) => {
  const missing = await manage(['policy']);
  t.equal(missing.code, 2);
  t.match(missing.stderr, /missing policy command/);
  const unknown = await manage(['policy', 'lint']);
  t.equal(unknown.code, 2);
  t.match(unknown.stderr, /unknown policy command 'lint'/);
  const help = await manage(['help']);
  t.equal(help.code, 0);
  t.match(help.stderr, /policy test \[DIR\]/);
  t.match(help.stderr, /policy explain --service S --method M --path P/);
});
