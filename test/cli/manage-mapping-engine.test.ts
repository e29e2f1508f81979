// `manage mapping_engine` against `keystone-manage mapping_engine` (Debian's keystone 22): the same
// files give the same output, byte for byte. Keystone's half is skipped where it is not installed;
// the expected outputs are also written out here, so ours is checked everywhere.

import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { manage } from '../helpers/manage.ts';

const run = promisify(execFile);
const KEYSTONE_MANAGE = '/usr/bin/keystone-manage';
const keystoneInstalled = fs.existsSync(KEYSTONE_MANAGE);

const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-mapping-engine-'));
t.teardown(() => fs.rmSync(directory, { recursive: true, force: true }));
const file = (name: string, content: string) => {
  const pathname = path.join(directory, name);
  fs.writeFileSync(pathname, content);
  return pathname;
};
// keystone-manage reads /etc/keystone/keystone.conf unless given another.
const keystoneConf = file('keystone.conf', '[DEFAULT]\n');

async function keystoneManage(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(KEYSTONE_MANAGE, ['--config-file', keystoneConf, 'mapping_engine', ...args], { encoding: 'utf8' });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failure = error as { code: number; stdout: string; stderr: string };
    return { code: failure.code, stdout: failure.stdout, stderr: failure.stderr };
  }
}

const rules = file(
  'rules.json',
  JSON.stringify({
    rules: [
      {
        local: [{ user: { name: '{0} {1}', email: '{2}', type: 'local', domain: { name: 'Default' } } }, { groups: '{3}', domain: { id: 'federated' } }],
        remote: [{ type: 'ASDF_FirstName' }, { type: 'ASDF_LastName' }, { type: 'ASDF_Email' }, { type: 'ASDF_Groups', whitelist: ['admins'] }],
      },
      { local: [{ projects: [{ name: 'Project for {0}', roles: [{ name: 'member' }] }] }], remote: [{ type: 'ASDF_Email' }] },
    ],
  }),
);
// A bare list is accepted too.
const listRules = file('list-rules.json', JSON.stringify([{ local: [{ user: { name: '{0}' } }, { group: { id: 'g1' } }], remote: [{ type: 'LOGIN' }] }]));
const input = file('input.txt', '\nASDF_FirstName: Jon Kåre\nASDF_LastName:  Hellån \r\nASDF_Email: jon@example.com\nASDF_Groups: users;admins\nOTHER: x: y\n\n');

const expected = `{
  "user": {
    "name": "Jon K\\u00e5re Hell\\u00e5n",
    "email": "jon@example.com",
    "type": "local",
    "domain": {
      "name": "Default"
    }
  },
  "group_ids": [],
  "group_names": [
    {
      "name": "admins",
      "domain": {
        "id": "federated"
      }
    }
  ],
  "projects": [
    {
      "name": "Project for jon@example.com",
      "roles": [
        {
          "name": "member"
        }
      ]
    }
  ]
}
`;

interface Case {
  name: string;
  args: string[];
  code: number;
  stdout?: string | RegExp;
  stderr?: RegExp;
  /** Keystone's stderr (a traceback for the engine's failures). */
  keystoneStderr?: RegExp;
}

const cases: Case[] = [
  { name: 'the mapped properties, as JSON', args: ['--rules', rules, '--input', input], code: 0, stdout: expected },
  { name: '--prefix keeps the attributes it starts', args: ['--rules', rules, '--input', input, '--prefix', 'ASDF_'], code: 0, stdout: expected },
  {
    name: 'a bare list of rules; a value holding a colon',
    args: ['--rules', listRules, '--input', file('login.txt', 'LOGIN: me:you\n')],
    code: 0,
    stdout: '{\n  "user": {\n    "name": "me:you",\n    "type": "ephemeral"\n  },\n  "group_ids": [\n    "g1"\n  ],\n  "group_names": [],\n  "projects": []\n}\n',
  },
  {
    name: '--engine-debug shows the rules and the assertion used',
    args: ['--rules', listRules, '--input', file('debug.txt', 'LOGIN: me\nX: 1;2\n'), '--engine-debug'],
    code: 0,
    // Then the engine's debug lines (Keystone's log, on stdout too), then the result.
    stdout: /^Using Rules:\n\{\n  "rules": \[\n    \{\n      "local": \[\n[\s\S]*\nUsing Assertion:\n\{\n  "LOGIN": "me",\n  "X": "1;2"\n\}\n(?:.*DEBUG keystone\.federation\.utils \[-\] assertion data: \{'LOGIN': 'me', 'X': '1;2'\}.*\n.*DEBUG keystone\.federation\.utils \[-\] assertion: \{'LOGIN': \['me'\], 'X': \['1', '2'\]\}.*\n)[\s\S]*\n\{\n  "user": \{\n    "name": "me",\n/,
  },
  {
    name: 'a line without a colon',
    args: ['--rules', rules, '--input', file('bad.txt', 'ASDF_Email: a@b\nno colon here\n')],
    code: 1,
    stderr: /assertion file \S+bad\.txt at line 2 expected 'key: value' but found 'no colon here' see help for file format\n$/,
  },
  { name: 'rules that are not JSON', args: ['--rules', file('bad.json', '{"rules": ['), '--input', input], code: 1, stderr: /Error while parsing rules \S+bad\.json: / },
  {
    name: 'an assertion no rule matches',
    args: ['--rules', listRules, '--input', file('nomatch.txt', 'OTHER: x\n')],
    code: 1,
    stderr: /ValidationError: Could not map any federated user properties to identity values\. Check debug logs or the mapping used for additional details\.\n$/,
    keystoneStderr: /keystone\.exception\.ValidationError: Could not map any federated user properties to identity values\./,
  },
  {
    name: 'a direct map with no remote match',
    args: ['--rules', file('direct.json', JSON.stringify({ rules: [{ local: [{ user: { name: '{1}' } }], remote: [{ type: 'LOGIN' }] }] })), '--input', file('me.txt', 'LOGIN: me\n')],
    code: 1,
    stderr: /DirectMappingError: Local section in mapping mapping_engine refers to a remote match that doesn't exist \(e\.g\. \{0\} in a local section\)\.\n$/,
    keystoneStderr: /keystone\.exception\.DirectMappingError/,
  },
];

t.test('manage mapping_engine', async (t) => {
  for (const testCase of cases) {
    t.test(testCase.name, async (t) => {
      const result = await manage(['mapping_engine', ...testCase.args]);
      t.equal(result.code, testCase.code, result.stderr);
      if (typeof testCase.stdout === 'string') t.equal(result.stdout, testCase.stdout);
      else if (testCase.stdout) t.match(result.stdout, testCase.stdout);
      if (testCase.stderr) t.match(result.stderr, testCase.stderr);
    });
  }

  t.test('usage errors: exit 2 with the usage', async (t) => {
    for (const args of [['--rules', rules], ['--input', input], ['--rules', rules, '--input', input, '--bogus'], ['--rules', rules, '--input', input, 'extra']]) {
      const result = await manage(['mapping_engine', ...args]);
      t.equal(result.code, 2, args.join(' '));
      t.match(result.stderr, /^manage mapping_engine: .+\n\nUsage: npm run manage -- mapping_engine --rules FILE --input FILE/);
      t.equal(result.stdout, '');
    }
    const missing = await manage(['mapping_engine', '--rules', rules]);
    t.match(missing.stderr, /the following arguments are required: --input/);
  });

  t.test('a file that cannot be read: exit 1', async (t) => {
    const result = await manage(['mapping_engine', '--rules', path.join(directory, 'absent.json'), '--input', input]);
    t.equal(result.code, 1);
    t.match(result.stderr, /^manage mapping_engine: Error while opening file \S+absent\.json: ENOENT/);
  });
});

t.test('keystone-manage mapping_engine gives the same', { skip: keystoneInstalled ? false : `${KEYSTONE_MANAGE} is not installed (Debian's keystone package)` }, async (t) => {
  for (const testCase of cases) {
    t.test(testCase.name, async (t) => {
      const result = await keystoneManage(testCase.args);
      t.equal(result.code, testCase.code, result.stderr);
      if (typeof testCase.stdout === 'string') t.equal(result.stdout, testCase.stdout);
      else if (testCase.stdout) t.match(result.stdout, testCase.stdout);
      // Keystone logs its failures on stdout, and eventlet adds noise on stderr when it exits.
      const expected = testCase.keystoneStderr ?? (testCase.stderr && new RegExp(testCase.stderr.source.replace(/\\n\$$/, '')));
      if (expected) t.match(result.stdout + result.stderr, expected);
    });
  }
});
