// Keystone 22's own tests of its mapping engine, ported: MappingRuleEngineTests, TestMappingLocals
// and TestUnicodeAssertionData (keystone/tests/unit/contrib/federation/test_utils.py) over the rule
// sets and assertions of keystone/tests/unit/mapping_fixtures.py (fixtures/keystone-mapping-fixtures.json,
// written by fixtures/dump-keystone-mapping-fixtures.py). Each case asserts what Keystone's asserts.
// The schema-only cases of that class (test_mapping_validation_*) belong to the mapping validator.

import fs from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { AuthenticationError, NotFoundError, ValidationError } from '../../src/support/errors.ts';
import {
  applyMappingFilter,
  assertionFromEnvironment,
  ephemeralUserIdentity,
  processAssertion,
  resolveMappedGroups,
  type MappedGroupLookup,
} from '../../src/federation/mapping-engine.ts';
import { DirectMappingError, MappedGroupNotFoundError, type Assertion, type MappedProperties, type MappingRules } from '../../src/federation/mapping-types.ts';

const fixtures = JSON.parse(fs.readFileSync(path.join(import.meta.dirname, 'fixtures/keystone-mapping-fixtures.json'), 'utf8')) as Record<string, unknown>;
const mapping = (name: string) => fixtures[name] as MappingRules;
const assertion = (name: string) => fixtures[name] as Record<string, string>;
const constant = (name: string) => fixtures[name] as string;

const FAKE_MAPPING_ID = 'fake-mapping-id';


/** assertValidMappedUserObject. */
function validMappedUser(t: Test, mapped: MappedProperties, userType = 'ephemeral', domainId?: string): void {
  t.ok(mapped.user, 'user object in mapped properties');
  t.equal(mapped.user.type, userType);
  if (domainId) t.equal(mapped.user.domain?.id || mapped.user.domain?.name, domainId);
}

interface Case {
  name: string;
  mapping: string;
  assertion: string | Assertion;
  /** The error Keystone raises, or the checks of what it returns. */
  throws?: new (...args: never[]) => Error;
  check?: (t: Test, mapped: MappedProperties, input: Assertion) => void;
}

const cases: Case[] = [
  {
    name: 'test_rule_engine_any_one_of_and_direct_mapping',
    mapping: 'MAPPING_LARGE',
    assertion: 'ADMIN_ASSERTION',
    check: (t, mapped, input) => {
      t.ok(mapped.group_ids.includes(constant('EMPLOYEE_GROUP_ID')));
      t.equal(mapped.user.name, `${input.FirstName} ${input.LastName}`);
    },
  },
  { name: 'test_rule_engine_no_regex_match', mapping: 'MAPPING_LARGE', assertion: 'BAD_TESTER_ASSERTION', throws: ValidationError },
  {
    name: 'test_rule_engine_regex_many_groups',
    mapping: 'MAPPING_TESTER_REGEX',
    assertion: 'TESTER_ASSERTION',
    check: (t, mapped, input) => {
      validMappedUser(t, mapped);
      t.equal(mapped.user.name, input.UserName);
      t.ok(mapped.group_ids.includes(constant('TESTER_GROUP_ID')));
    },
  },
  {
    name: 'test_rule_engine_any_one_of_many_rules',
    mapping: 'MAPPING_SMALL',
    assertion: 'CONTRACTOR_ASSERTION',
    check: (t, mapped, input) => {
      validMappedUser(t, mapped);
      t.equal(mapped.user.name, input.UserName);
      t.ok(mapped.group_ids.includes(constant('CONTRACTOR_GROUP_ID')));
    },
  },
  {
    name: 'test_rule_engine_not_any_of_and_direct_mapping',
    mapping: 'MAPPING_LARGE',
    assertion: 'CUSTOMER_ASSERTION',
    check: (t, mapped, input) => {
      validMappedUser(t, mapped);
      t.equal(mapped.user.name, input.UserName);
      t.same(mapped.group_ids, []);
    },
  },
  {
    name: 'test_rule_engine_not_any_of_many_rules',
    mapping: 'MAPPING_SMALL',
    assertion: 'EMPLOYEE_ASSERTION',
    check: (t, mapped, input) => {
      validMappedUser(t, mapped);
      t.equal(mapped.user.name, input.UserName);
      t.ok(mapped.group_ids.includes(constant('EMPLOYEE_GROUP_ID')));
    },
  },
  {
    name: 'test_rule_engine_not_any_of_regex_verify_pass',
    mapping: 'MAPPING_DEVELOPER_REGEX',
    assertion: 'DEVELOPER_ASSERTION',
    check: (t, mapped, input) => {
      validMappedUser(t, mapped);
      t.equal(mapped.user.name, input.UserName);
      t.ok(mapped.group_ids.includes(constant('DEVELOPER_GROUP_ID')));
    },
  },
  { name: 'test_rule_engine_not_any_of_regex_verify_fail', mapping: 'MAPPING_DEVELOPER_REGEX', assertion: 'BAD_DEVELOPER_ASSERTION', throws: ValidationError },
  ...['TESTER_ASSERTION', 'MALFORMED_TESTER_ASSERTION'].map(
    (name): Case => ({
      name: name === 'TESTER_ASSERTION' ? 'test_rule_engine_regex_match_and_many_groups' : 'test_rule_engine_discards_nonstring_objects',
      mapping: 'MAPPING_LARGE',
      assertion: name,
      check: (t, mapped, input) => {
        validMappedUser(t, mapped);
        t.equal(mapped.user.name, input.UserName);
        t.ok(mapped.group_ids.includes(constant('DEVELOPER_GROUP_ID')));
        t.ok(mapped.group_ids.includes(constant('TESTER_GROUP_ID')));
      },
    }),
  ),
  {
    name: 'test_rule_engine_regex_blacklist',
    mapping: 'MAPPING_GROUPS_BLACKLIST_REGEX',
    assertion: 'EMPLOYEE_PARTTIME_ASSERTION',
    check: (t, mapped) =>
      t.strictSame(mapped, { user: { type: 'ephemeral' }, group_ids: [], group_names: [{ name: 'Manager', domain: { id: constant('FEDERATED_DOMAIN') } }], projects: [] }),
  },
  {
    name: 'test_rule_engine_regex_whitelist',
    mapping: 'MAPPING_GROUPS_WHITELIST_REGEX',
    assertion: 'EMPLOYEE_PARTTIME_ASSERTION',
    check: (t, mapped) =>
      t.strictSame(mapped, {
        user: { type: 'ephemeral' },
        group_ids: [],
        group_names: [
          { name: 'Employee', domain: { id: constant('FEDERATED_DOMAIN') } },
          { name: 'PartTimeEmployee', domain: { id: constant('FEDERATED_DOMAIN') } },
        ],
        projects: [],
      }),
  },
  { name: 'test_rule_engine_fails_after_discarding_nonstring', mapping: 'MAPPING_SMALL', assertion: 'CONTRACTOR_MALFORMED_ASSERTION', throws: ValidationError },
  {
    name: 'test_using_remote_direct_mapping_that_doesnt_exist_fails',
    mapping: 'MAPPING_DIRECT_MAPPING_THROUGH_KEYWORD',
    assertion: 'CUSTOMER_ASSERTION',
    throws: DirectMappingError,
  },
  {
    name: 'test_rule_engine_returns_group_names',
    mapping: 'MAPPING_GROUP_NAMES',
    assertion: 'EMPLOYEE_ASSERTION',
    check: (t, mapped) => {
      validMappedUser(t, mapped);
      const reference: Record<string, unknown> = {
        [constant('DEVELOPER_GROUP_NAME')]: { name: constant('DEVELOPER_GROUP_NAME'), domain: { name: constant('DEVELOPER_GROUP_DOMAIN_NAME') } },
        [constant('TESTER_GROUP_NAME')]: { name: constant('TESTER_GROUP_NAME'), domain: { id: constant('DEVELOPER_GROUP_DOMAIN_ID') } },
      };
      for (const group of mapped.group_names) t.strictSame(group, reference[(group as { name: string }).name]);
      // Each `group` by name adds every group by name seen so far (Keystone's extract_groups): the
      // first comes twice. Keystone's test does not count them; its engine returns these three.
      t.same(
        mapped.group_names.map((group) => (group as { name: string }).name),
        ['Developer', 'Developer', 'tester'],
      );
    },
  },
  {
    name: 'test_rule_engine_whitelist_and_direct_groups_mapping',
    mapping: 'MAPPING_GROUPS_WHITELIST',
    assertion: 'EMPLOYEE_ASSERTION_MULTIPLE_GROUPS',
    check: (t, mapped) => {
      const domain = { id: constant('DEVELOPER_GROUP_DOMAIN_ID') };
      // Keystone compares each group with its reference (the order comes from a set there).
      t.strictSame(mapped.group_names, [
        { name: constant('DEVELOPER_GROUP_NAME'), domain },
        { name: constant('CONTRACTOR_GROUP_NAME'), domain },
      ]);
      t.equal(mapped.user.name, 'tbo');
      t.same(mapped.group_ids, []);
    },
  },
  ...['MAPPING_GROUPS_BLACKLIST', 'MAPPING_GROUPS_BLACKLIST_MULTIPLES'].map(
    (name): Case => ({
      name: name === 'MAPPING_GROUPS_BLACKLIST' ? 'test_rule_engine_blacklist_and_direct_groups_mapping' : 'test_rule_engine_blacklist_and_direct_groups_mapping_multiples',
      mapping: name,
      assertion: 'EMPLOYEE_ASSERTION_MULTIPLE_GROUPS',
      check: (t, mapped) => {
        t.strictSame(mapped.group_names, [{ name: constant('CONTRACTOR_GROUP_NAME'), domain: { id: constant('DEVELOPER_GROUP_DOMAIN_ID') } }]);
        t.equal(mapped.user.name, 'tbo');
        t.same(mapped.group_ids, []);
      },
    }),
  ),
  {
    name: 'test_rule_engine_whitelist_direct_group_mapping_missing_domain',
    mapping: 'MAPPING_GROUPS_WHITELIST_MISSING_DOMAIN',
    assertion: 'EMPLOYEE_ASSERTION_MULTIPLE_GROUPS',
    throws: ValidationError,
  },
  {
    name: 'test_rule_engine_blacklist_direct_group_mapping_missing_domain',
    mapping: 'MAPPING_GROUPS_BLACKLIST_MISSING_DOMAIN',
    assertion: 'EMPLOYEE_ASSERTION_MULTIPLE_GROUPS',
    throws: ValidationError,
  },
  {
    name: 'test_rule_engine_no_groups_allowed',
    mapping: 'MAPPING_GROUPS_WHITELIST',
    assertion: 'EMPLOYEE_ASSERTION',
    check: (t, mapped) => {
      t.same(mapped.group_names, []);
      t.same(mapped.group_ids, []);
      t.equal(mapped.user.name, 'tbo');
    },
  },
  { name: 'test_mapping_federated_domain_specified', mapping: 'MAPPING_EPHEMERAL_USER', assertion: 'EMPLOYEE_ASSERTION', check: (t, mapped) => validMappedUser(t, mapped) },
  {
    name: 'test_set_ephemeral_domain_to_ephemeral_users',
    mapping: 'MAPPING_EPHEMERAL_USER_LOCAL_DOMAIN',
    assertion: 'CONTRACTOR_ASSERTION',
    check: (t, mapped) => validMappedUser(t, mapped),
  },
  {
    name: 'test_local_user_local_domain',
    mapping: 'MAPPING_LOCAL_USER_LOCAL_DOMAIN',
    assertion: 'CONTRACTOR_ASSERTION',
    check: (t, mapped) => validMappedUser(t, mapped, 'local', constant('LOCAL_DOMAIN')),
  },
  {
    name: 'test_user_identifications_name',
    mapping: 'MAPPING_USER_IDS',
    assertion: 'CONTRACTOR_ASSERTION',
    check: (t, mapped) => {
      validMappedUser(t, mapped);
      t.equal(mapped.user.name, 'jsmith');
      t.same(ephemeralUserIdentity(mapped.user), { id: 'jsmith', name: 'jsmith' });
    },
  },
  {
    name: 'test_user_identifications_name_and_federated_domain',
    mapping: 'MAPPING_USER_IDS',
    assertion: 'EMPLOYEE_ASSERTION',
    check: (t, mapped) => {
      validMappedUser(t, mapped);
      t.same(ephemeralUserIdentity(mapped.user), { id: 'abc123%40example.com', name: 'tbo' });
    },
  },
  {
    name: 'test_user_identification_id',
    mapping: 'MAPPING_USER_IDS',
    assertion: 'ADMIN_ASSERTION',
    check: (t, mapped) => {
      validMappedUser(t, mapped);
      t.same(ephemeralUserIdentity(mapped.user), { id: 'bob', name: 'bob' });
    },
  },
  {
    name: 'test_get_user_unique_id_and_display_name',
    mapping: 'MAPPING_USER_IDS',
    assertion: 'ADMIN_ASSERTION',
    check: (t, mapped) => {
      validMappedUser(t, mapped);
      t.same(ephemeralUserIdentity(mapped.user, 'remote_user'), { id: 'bob', name: 'remote_user' });
    },
  },
  ...[
    ['CUSTOMER_ASSERTION', 'bwilliams'],
    ['EMPLOYEE_ASSERTION', 'tbo'],
  ].map(
    ([input, userName]): Case => ({
      name: `test_user_identification_id_and_name (${input})`,
      mapping: 'MAPPING_USER_IDS',
      assertion: input!,
      check: (t, mapped) => {
        validMappedUser(t, mapped);
        t.same(ephemeralUserIdentity(mapped.user), { id: 'abc123%40example.com', name: userName });
      },
    }),
  ),
  {
    name: 'test_whitelist_pass_through',
    mapping: 'MAPPING_GROUPS_WHITELIST_PASS_THROUGH',
    assertion: 'DEVELOPER_ASSERTION',
    check: (t, mapped) => {
      validMappedUser(t, mapped);
      t.equal(mapped.user.name, 'developacct');
      t.equal((mapped.group_names[0] as { name: string }).name, 'Developer');
    },
  },
  { name: 'test_type_not_in_assertion', mapping: 'MAPPING_GROUPS_WHITELIST_PASS_THROUGH', assertion: { '6a1e1c5d': 'f1b3c4d2' }, throws: ValidationError },
  {
    name: 'test_rule_engine_groups_mapping_only_one_group',
    mapping: 'MAPPING_GROUPS_WITH_EMAIL',
    assertion: 'GROUPS_ASSERTION_ONLY_ONE_GROUP',
    check: (t, mapped) => {
      t.equal(mapped.user.name, 'jsmith');
      t.equal(mapped.user.email, 'jill@example.com');
      t.equal((mapped.group_names[0] as { name: string }).name, 'ALL USERS');
    },
  },
  {
    name: 'test_rule_engine_groups_mapping_only_one_numerical_group',
    mapping: 'MAPPING_GROUPS_WITH_EMAIL',
    assertion: 'GROUPS_ASSERTION_ONLY_ONE_NUMERICAL_GROUP',
    check: (t, mapped) => {
      t.equal(mapped.user.name, 'jsmith');
      t.equal(mapped.user.email, 'jill@example.com');
      t.equal((mapped.group_names[0] as { name: string }).name, '1234', 'a string, not the number literal_eval reads');
    },
  },
  ...['MAPPING_GROUPS_IDS_WHITELIST', 'MAPPING_GROUPS_IDS_BLACKLIST'].map(
    (name): Case => ({
      name: name.endsWith('WHITELIST') ? 'test_rule_engine_group_ids_mapping_whitelist' : 'test_rule_engine_group_ids_mapping_blacklist',
      mapping: name,
      assertion: 'GROUP_IDS_ASSERTION',
      check: (t, mapped) => {
        t.equal(mapped.user.name, 'opilotte');
        t.same(mapped.group_names, []);
        t.same([...mapped.group_ids].sort(), ['abc123', 'ghi789', 'klm012']);
      },
    }),
  ),
  {
    name: 'test_rule_engine_group_ids_mapping_only_one_group',
    mapping: 'MAPPING_GROUPS_IDS_WHITELIST',
    assertion: 'GROUP_IDS_ASSERTION_ONLY_ONE_GROUP',
    check: (t, mapped) => {
      t.equal(mapped.user.name, 'opilotte');
      t.same(mapped.group_names, []);
      t.same([...mapped.group_ids].sort(), ['210mlk', '321cba']);
    },
  },
  {
    name: 'test_mapping_projects',
    mapping: 'MAPPING_PROJECTS',
    assertion: 'EMPLOYEE_ASSERTION',
    check: (t, mapped) => {
      validMappedUser(t, mapped);
      t.equal(mapped.user.name, 'tbo');
      t.strictSame(mapped.projects, [
        { name: 'Production', roles: [{ name: 'observer' }] },
        { name: 'Staging', roles: [{ name: 'member' }] },
        { name: 'Project for tbo', roles: [{ name: 'admin' }] },
      ]);
    },
  },
  {
    name: 'test_rule_engine_for_groups_and_domain',
    mapping: 'MAPPING_GROUPS_DOMAIN_OF_USER',
    assertion: 'GROUPS_DOMAIN_ASSERTION',
    check: (t, mapped) => {
      validMappedUser(t, mapped);
      t.equal(mapped.user.name, 'bwilliams');
      t.same(
        mapped.group_names.map((group) => (group as { name: string }).name),
        ['group1', 'group2'],
      );
      t.strictSame(mapped.group_names, [
        { name: 'group1', domain: { name: 'xxx' } },
        { name: 'group2', domain: { name: 'yyy' } },
      ]);
      t.same(mapped.group_ids, []);
    },
  },
  {
    // TestUnicodeAssertionData.test_unicode: the prefixed environment, as the web server sets it.
    name: 'test_unicode',
    mapping: 'MAPPING_UNICODE',
    assertion: assertionFromEnvironment({ ...assertion('UNICODE_NAME_ASSERTION'), OTHER: 'x', 'wsgi.input': {} }, 'PFX'),
    check: (t, mapped) => t.equal(mapped.user.name, 'Jon Kåre Hellån'),
  },
];

t.test("Keystone's MappingRuleEngineTests", async (t) => {
  for (const testCase of cases) {
    t.test(testCase.name, async (t) => {
      const input = typeof testCase.assertion === 'string' ? assertion(testCase.assertion) : testCase.assertion;
      const run = () => processAssertion(FAKE_MAPPING_ID, mapping(testCase.mapping).rules, input);
      if (testCase.throws) {
        t.throws(run, testCase.throws);
        return;
      }
      testCase.check!(t, run(), input);
    });
  }
});

t.test("Keystone's TestMappingLocals", async (t) => {
  const rulesOf = (local: unknown[], remote = [{ type: 'idp_username' }]) => [{ local, remote }] as unknown as MappingRules['rules'];
  const input = { idp_username: 'a_user' };
  const split = processAssertion(FAKE_MAPPING_ID, rulesOf([{ user: { name: '{0}' } }, { group: { id: 'd34db33f' } }]), input);
  const combined = processAssertion(FAKE_MAPPING_ID, rulesOf([{ user: { name: '{0}' }, group: { id: 'd34db33f' } }]), input);
  t.strictSame(split, { user: { name: 'a_user', type: 'ephemeral' }, group_ids: ['d34db33f'], group_names: [], projects: [] }, 'test_local_list_gets_squashed_into_a_single_dictionary');
  t.strictSame(combined, split);
  const duplicate = processAssertion(FAKE_MAPPING_ID, rulesOf([{ user: { name: 'test_{0}' } }, { user: { name: '{0}' } }]), input);
  t.strictSame(duplicate, { user: { name: 'test_a_user', type: 'ephemeral' }, group_ids: [], group_names: [], projects: [] }, 'test_when_local_list_gets_squashed_first_dict_wins');
});

/** A group lookup over in-memory tables. */
function memoryLookup(groups: { id: string; name: string; domainId: string }[], domains: { id: string; name: string }[]): MappedGroupLookup & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    async groupExists(id) {
      calls.push(`get_group ${id}`);
      return groups.some((group) => group.id === id);
    },
    async findGroupId(name, domainId) {
      calls.push(`get_group_by_name ${name} ${domainId}`);
      return groups.find((group) => group.name === name && group.domainId === domainId)?.id;
    },
    async findDomainId(name) {
      calls.push(`get_domain_by_name ${name}`);
      return domains.find((domain) => domain.name === name)?.id;
    },
  };
}

t.test('after the engine: group ids checked, group names resolved (apply_mapping_filter)', async (t) => {
  const domains = [
    { id: 'd-out', name: constant('DEVELOPER_GROUP_DOMAIN_NAME') },
    { id: constant('DEVELOPER_GROUP_DOMAIN_ID'), name: 'by-id' },
  ];
  const groups = [
    { id: 'g-dev', name: constant('DEVELOPER_GROUP_NAME'), domainId: 'd-out' },
    { id: 'g-tester', name: constant('TESTER_GROUP_NAME'), domainId: constant('DEVELOPER_GROUP_DOMAIN_ID') },
    { id: constant('EMPLOYEE_GROUP_ID'), name: 'employees', domainId: 'd-out' },
  ];

  t.test('names resolve in their domain, by domain name or id; ids pass', async (t) => {
    const lookup = memoryLookup(groups, domains);
    const mapped = await applyMappingFilter(FAKE_MAPPING_ID, mapping('MAPPING_GROUP_NAMES').rules, assertion('EMPLOYEE_ASSERTION'), lookup);
    t.same(mapped.group_ids, ['g-dev', 'g-tester']);
    t.equal(mapped.user.name, 'tbo');
    // Developer is mapped twice (see test_rule_engine_returns_group_names) and looked up twice, as Keystone does.
    t.strictSame(lookup.calls, [
      'get_domain_by_name outsourcing',
      'get_group_by_name Developer d-out',
      'get_domain_by_name outsourcing',
      'get_group_by_name Developer d-out',
      `get_group_by_name tester ${constant('DEVELOPER_GROUP_DOMAIN_ID')}`,
    ]);
  });

  t.test('a group name not found is dropped (logged by Keystone)', async (t) => {
    const mapped = processAssertion(FAKE_MAPPING_ID, mapping('MAPPING_GROUPS_WHITELIST').rules, assertion('EMPLOYEE_ASSERTION_MULTIPLE_GROUPS'));
    const ids = await resolveMappedGroups(mapped, FAKE_MAPPING_ID, memoryLookup([{ id: 'g-c', name: 'Contractor', domainId: constant('DEVELOPER_GROUP_DOMAIN_ID') }], domains));
    t.same(ids, ['g-c']);
  });

  t.test('a mapped group id that does not exist fails the login: MappedGroupNotFound (500)', async (t) => {
    const lookup = memoryLookup([], domains);
    await t.rejects(applyMappingFilter(FAKE_MAPPING_ID, mapping('MAPPING_SMALL').rules, assertion('EMPLOYEE_ASSERTION'), lookup), new MappedGroupNotFoundError(constant('EMPLOYEE_GROUP_ID'), FAKE_MAPPING_ID));
    const error = await applyMappingFilter(FAKE_MAPPING_ID, mapping('MAPPING_SMALL').rules, assertion('EMPLOYEE_ASSERTION'), lookup).catch((caught: unknown) => caught);
    t.match(error, { message: `Group ${constant('EMPLOYEE_GROUP_ID')} returned by mapping ${FAKE_MAPPING_ID} was not found in the backend.`, pythonException: 'MappedGroupNotFound' });
    t.notOk(error instanceof ValidationError || error instanceof AuthenticationError, 'not a client error');
  });

  t.test("a domain name that does not exist: Keystone's DomainNotFound (404)", async (t) => {
    const mapped = processAssertion(FAKE_MAPPING_ID, mapping('MAPPING_GROUP_NAMES').rules, assertion('EMPLOYEE_ASSERTION'));
    await t.rejects(resolveMappedGroups(mapped, FAKE_MAPPING_ID, memoryLookup(groups, [])), NotFoundError.of('domain', 'outsourcing'));
  });

  t.test('the distinct ids, the mapped ids first', async (t) => {
    const rules = [{ local: [{ group: { id: 'g-dev' } }, { groups: "['Developer', 'Developer']", domain: { id: 'd-out' } }, { group_ids: '{0}' }], remote: [{ type: 'ids' }] }] as unknown as MappingRules['rules'];
    const ids = await resolveMappedGroups(processAssertion(FAKE_MAPPING_ID, rules, { ids: 'g-tester;g-dev' }), FAKE_MAPPING_ID, memoryLookup(groups, domains));
    t.same(ids, ['g-dev', 'g-tester']);
  });

  t.test('a mapping that maps nothing, or is invalid, fails the authentication: 401', async (t) => {
    const lookup = memoryLookup(groups, domains);
    const nothing = await applyMappingFilter(FAKE_MAPPING_ID, mapping('MAPPING_LARGE').rules, assertion('BAD_TESTER_ASSERTION'), lookup).catch((caught: unknown) => caught);
    t.ok(nothing instanceof AuthenticationError);
    t.equal((nothing as AuthenticationError).message, 'The request you have made requires authentication.', 'the generic text for the client');
    t.match((nothing as AuthenticationError).failure, { reason: /^Could not map any federated user properties/, code: 401 });
    const invalid = await applyMappingFilter(FAKE_MAPPING_ID, mapping('MAPPING_GROUPS_WHITELIST_MISSING_DOMAIN').rules, assertion('EMPLOYEE_ASSERTION_MULTIPLE_GROUPS'), lookup).catch((caught: unknown) => caught);
    t.ok(invalid instanceof AuthenticationError);
    t.match((invalid as AuthenticationError).failure, { reason: /^Invalid rule: .*Both 'groups' and 'domain' keywords must be specified\.$/ });
    await t.rejects(applyMappingFilter(FAKE_MAPPING_ID, mapping('MAPPING_DIRECT_MAPPING_THROUGH_KEYWORD').rules, assertion('CUSTOMER_ASSERTION'), lookup), DirectMappingError, 'a DirectMappingError stays a 500');
  });

  t.test('an ephemeral user with neither id nor name nor REMOTE_USER: Unauthorized', async (t) => {
    t.throws(() => ephemeralUserIdentity({ type: 'ephemeral' }), new AuthenticationError('Could not map user while setting ephemeral user identity. Either mapping rules must specify user id/name or REMOTE_USER environment variable must be set.'));
    t.same(ephemeralUserIdentity({ type: 'ephemeral', name: 'Jon Kåre/x' }), { id: 'Jon%20K%C3%A5re/x', name: 'Jon Kåre/x' }, "urllib.parse.quote's safe characters");
    t.same(ephemeralUserIdentity({ type: 'ephemeral', id: "a!'()*~" }), { id: 'a%21%27%28%29%2A~', name: "a!'()*~" });
  });
});
