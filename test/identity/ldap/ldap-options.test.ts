import t from 'tap';
import { parseLdapOptions } from '../../../src/identity/ldap/ldap-options.ts';
import { ValidationError } from '../../../src/support/errors.ts';

// Keystone's [ldap] options: its defaults, and values as oslo.config takes them (strings or JSON).

t.test('defaults are Keystone 22 defaults', (t) => {
  const options = parseLdapOptions({});
  t.match(options, {
    url: 'ldap://localhost',
    user: undefined,
    password: undefined,
    suffix: 'cn=example,cn=com',
    queryScope: 'one',
    pageSize: 0,
    userTreeDn: 'ou=Users,cn=example,cn=com',
    userObjectclass: 'inetOrgPerson',
    userIdAttribute: 'cn',
    userNameAttribute: 'sn',
    userMailAttribute: 'mail',
    userDescriptionAttribute: 'description',
    userPassAttribute: 'userPassword',
    userEnabledAttribute: 'enabled',
    userEnabledDefault: 'True',
    userEnabledMask: 0,
    userEnabledInvert: false,
    groupTreeDn: 'ou=UserGroups,cn=example,cn=com',
    groupObjectclass: 'groupOfNames',
    groupIdAttribute: 'cn',
    groupNameAttribute: 'ou',
    groupMemberAttribute: 'member',
    groupMembersAreIds: false,
    groupDescAttribute: 'description',
    useTls: false,
    tlsReqCert: 'demand',
    connectionTimeout: -1,
    operationTimeout: 10,
  });
  t.end();
});

t.test('strings and JSON values are taken as oslo.config takes them', (t) => {
  const fromStrings = parseLdapOptions({
    suffix: 'dc=example,dc=org',
    page_size: '100',
    user_enabled_invert: 'True',
    group_members_are_ids: 'yes',
    use_tls: '0',
    query_scope: 'SUB',
    user_enabled_mask: '2',
    user_enabled_default: '512',
    connection_timeout: '2.5',
  });
  t.match(fromStrings, {
    userTreeDn: 'ou=Users,dc=example,dc=org',
    pageSize: 100,
    userEnabledInvert: true,
    groupMembersAreIds: true,
    useTls: false,
    queryScope: 'sub',
    userEnabledMask: 2,
    userEnabledDefault: '512',
    connectionTimeout: 2.5,
  });
  const fromJson = parseLdapOptions({ page_size: 5, user_enabled_invert: false, group_members_are_ids: true, user_enabled_default: false, user: null });
  t.match(fromJson, { pageSize: 5, userEnabledInvert: false, groupMembersAreIds: true, userEnabledDefault: 'false', user: undefined });
  t.end();
});

t.test('bad values are ValidationErrors naming the option', (t) => {
  const cases: Array<[Record<string, unknown>, RegExp]> = [
    [{ page_size: 'ten' }, /ldap\.page_size/],
    [{ page_size: -1 }, /ldap\.page_size/],
    [{ page_size: 1.5 }, /ldap\.page_size/],
    [{ query_scope: 'base' }, /ldap\.query_scope/],
    [{ user_enabled_invert: 'maybe' }, /ldap\.user_enabled_invert/],
    [{ group_members_are_ids: 2 }, /ldap\.group_members_are_ids/],
    [{ tls_req_cert: 'sometimes' }, /ldap\.tls_req_cert/],
    [{ url: 'http://example.org' }, /ldap\.url/],
    [{ user_tree_dn: { nested: true } }, /ldap\.user_tree_dn/],
    [{ connection_timeout: 'soon' }, /ldap\.connection_timeout/],
    [{ user_enabled_mask: '2', user_enabled_default: 'True' }, /ldap\.user_enabled_default/],
    [{ use_tls: 'true', url: 'ldaps://example.org' }, /use_tls/],
  ];
  for (const [group, message] of cases) {
    t.throws(() => parseLdapOptions(group), ValidationError, JSON.stringify(group));
    t.throws(() => parseLdapOptions(group), { message }, JSON.stringify(group));
  }
  t.end();
});
