import t from 'tap';
import { mappingSchemaErrors, pythonRepr, validateMapping, validateMappingRules } from '../../src/federation/mapping-rules-schema.ts';
import { ValidationError } from '../../src/support/errors.ts';

// Keystone 22's validate_mapping_structure: every error, in its words and order. The expected texts
// were answered by the real Keystone 22 (test/e2e/federation-keystone.test.ts asks it again).

t.test('valid rules pass, whatever schema version is named (Keystone 22 has one schema)', async (t) => {
  const rules = [
    {
      local: [
        { user: { name: '{0}', email: '{1}', type: 'ephemeral', domain: { name: 'Default' } } },
        { group: { id: 'g1' } },
        { group: { name: 'devs', domain: { id: 'default' } } },
        { groups: '{2}', domain: { id: 'default' } },
        { group_ids: '{3}' },
        { projects: [{ name: 'p', roles: [{ name: 'member' }] }] },
      ],
      remote: [
        { type: 'OIDC-preferred_username' },
        { type: 'OIDC-email', any_one_of: ['a@x'], regex: true },
        { type: 'OIDC-groups', not_any_of: ['bad'] },
        { type: 'OIDC-groups', whitelist: ['admins'] },
        { type: 'OIDC-groups', blacklist: ['guests'] },
      ],
    },
  ];
  t.same(mappingSchemaErrors({ rules }), []);
  t.doesNotThrow(() => validateMappingRules(rules));
  t.doesNotThrow(() => validateMappingRules(rules, '2.0'));
  t.doesNotThrow(() => validateMapping({ rules, schema_version: '1.0', other: 1 }), 'other keys of the mapping are let through');
});

t.test("Keystone's texts, sorted, one a line", async (t) => {
  const cases: [unknown, string][] = [
    [{}, "'rules' is a required property\n"],
    [{ rules: [] }, '[] is too short\n'],
    [{ rules: 'x', foo: 1 }, "'x' is not of type 'array'\n"],
    ['x', "'x' is not of type 'object'\n"],
    [
      {
        rules: [
          { local: [{ user: { name: 'x', bad: 1 }, group: { id: 'g', name: 'n' } }], remote: [{ type: 'a', any_one_of: ['x'], not_any_of: ['y'] }, { foo: 1 }], extra: true },
          { remote: [] },
          5,
        ],
      },
      "'local' is a required property\n5 is not of type 'object'\nAdditional properties are not allowed ('bad' was unexpected)\nAdditional properties are not allowed ('extra' was unexpected)\n[] is too short\n{'foo': 1} is not valid under any of the given schemas\n{'id': 'g', 'name': 'n'} is not valid under any of the given schemas\n{'type': 'a', 'any_one_of': ['x'], 'not_any_of': ['y']} is not valid under any of the given schemas\n",
    ],
    [
      { rules: [{ local: [{ user: { type: 'bad', domain: { x: 'y' } }, projects: [{ name: 'p' }], group: { name: 'n' } }], remote: [{ type: 'a', regex: 'yes', any_one_of: 'x' }] }] },
      "'bad' is not one of ['ephemeral', 'local']\n'roles' is a required property\nAdditional properties are not allowed ('x' was unexpected)\n{'name': 'n'} is not valid under any of the given schemas\n{'type': 'a', 'regex': 'yes', 'any_one_of': 'x'} is not valid under any of the given schemas\n",
    ],
    [{ rules: [{ local: [{ b: 1, a: 2 }], remote: [{ type: 1 }] }] }, "Additional properties are not allowed ('a', 'b' were unexpected)\n{'type': 1} is not valid under any of the given schemas\n"],
    [{ rules: [{ local: [{ projects: [{ name: 'p', roles: [{ name: 'r', additionalProperties: 1 }] }] }], remote: [{ type: 't' }] }] }, "False schema does not allow 1\n"],
  ];
  for (const [mapping, message] of cases) {
    t.throws(() => validateMapping(mapping), new ValidationError(message), JSON.stringify(mapping));
  }
  t.throws(() => validateMappingRules(undefined), new ValidationError("'rules' is a required property\n"), 'no rules');
});

t.test('instances are quoted as Python prints them', async (t) => {
  t.equal(pythonRepr({ a: [true, false, null, 1, 1.5, 'it\'s', 'say "hi"', 'both \' and "'] }), `{'a': [True, False, None, 1, 1.5, "it's", 'say "hi"', 'both \\' and "']}`);
  t.equal(pythonRepr('tab\there\nnl\\'), "'tab\\there\\nnl\\\\'");
  t.equal(pythonRepr('\u0001é\u00ad\u2028'), "'\\x01é\\xad\\u2028'");
  t.equal(pythonRepr(1e-5), '1e-05');
  t.equal(pythonRepr(0.0001), '0.0001');
});

t.test('a regex requirement must compile when the mapping is written (Keystone fails the login with a 500 instead)', async (t) => {
  const rule = (values: string[]) => [{ local: [{ user: { name: '{0}' } }], remote: [{ type: 'HTTP_OIDC_SUB' }, { type: 'HTTP_OIDC_GROUPS', any_one_of: values, regex: true }] }];
  t.doesNotThrow(() => validateMappingRules(rule(['^dev.*$', '(?P<team>ops)'])), 'Python syntax the engine translates');
  t.throws(() => validateMappingRules(rule(['dev(', 'ok'])), { name: 'ValidationError', message: /^Invalid regular expression 'dev\(' in any_one_of of 'HTTP_OIDC_GROUPS': / });
  t.throws(() => validateMappingRules(rule(['(?x) verbose'])), ValidationError, 'a construct the engine does not translate');
  t.doesNotThrow(() => validateMappingRules(rule(['dev('].map((value) => value.replace('(', '\\(')))), 'escaped');
  // Without regex the values are plain strings: anything goes.
  t.doesNotThrow(() => validateMappingRules([{ local: [{ user: { name: '{0}' } }], remote: [{ type: 'HTTP_OIDC_SUB' }, { type: 'HTTP_OIDC_GROUPS', any_one_of: ['dev('] }] }]));
  t.doesNotThrow(() => validateMapping({ rules: rule(['dev(']) }), 'the offline check (manage mapping_engine) stays Keystone\'s schema alone');
});
