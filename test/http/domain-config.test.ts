import t from 'tap';
import { startTestApp } from '../helpers/app.ts';

// Keystone's domain configuration API, as a real Keystone 22 answers (asked: see
// test/e2e/domain-config-keystone.test.ts for the same calls side by side).

const invalid = (reason: string) => ({ error: { code: 403, title: 'Forbidden', message: `Invalid domain specific configuration: ${reason}.` } });
const notFound = (message: string) => ({ error: { code: 404, title: 'Not Found', message } });

t.test('the domain configuration API', async (t) => {
  const { call, login } = await startTestApp(t);
  const domain = (await call('POST', '/v3/domains', { domain: { name: 'corp' } })).json().domain;
  const base = `/v3/domains/${domain.id}/config`;
  const none = (what: string) => notFound(`Could not find ${what} in domain configuration for domain ${domain.id}.`);

  await t.test('no configuration yet: 404 in Keystone\'s words', async (t) => {
    const answer = await call('GET', base);
    t.equal(answer.statusCode, 404);
    t.same(answer.json(), none('any options'));
    t.same((await call('GET', `${base}/ldap`)).json(), none('group ldap'));
    t.same((await call('GET', `${base}/ldap/url`)).json(), none('option url in group ldap'));
    t.same((await call('GET', '/v3/domains/nowhere/config')).json(), notFound('Could not find any options in domain configuration for domain nowhere.'));
  });

  await t.test('PUT creates (201), then replaces (200); the password is kept but never returned', async (t) => {
    const first = await call('PUT', base, { config: { identity: { driver: 'ldap' }, ldap: { url: 'ldap://x', user: 'cn=admin', password: 's3cret' } } });
    t.equal(first.statusCode, 201);
    t.same(first.json(), { config: { identity: { driver: 'ldap' }, ldap: { url: 'ldap://x', user: 'cn=admin' } } });
    const second = await call('PUT', base, { config: { identity: { driver: 'ldap' }, ldap: { url: 'ldap://y', password: 's3cret' } } });
    t.equal(second.statusCode, 200);
    t.same(second.json(), { config: { identity: { driver: 'ldap' }, ldap: { url: 'ldap://y' } } }, 'the options of the first are gone');
    t.same((await call('GET', base)).json(), { config: { identity: { driver: 'ldap' }, ldap: { url: 'ldap://y' } } });
    t.same((await call('GET', `${base}/ldap`)).json(), { config: { ldap: { url: 'ldap://y' } } });
    t.same((await call('GET', `${base}/ldap/url`)).json(), { config: { url: 'ldap://y' } });
    t.same((await call('GET', `${base}/ldap/password`)).json(), none('option password in group ldap'));
    t.same((await call('GET', `${base}/identity/list_limit`)).json(), none('option list_limit in group identity'));
  });

  await t.test('PUT: Keystone\'s validation', async (t) => {
    t.same((await call('PUT', base, { config: {} })).json(), invalid('No options specified'));
    t.same((await call('PUT', base, { conf: {} })).json(), invalid('No options specified'));
    t.same((await call('PUT', base, { config: [] })).json(), invalid('No options specified'));
    t.same((await call('PUT', base, { config: { foo: { a: 1 } } })).json(), invalid('Group foo is not supported for domain specific configurations'));
    t.same((await call('PUT', base, { config: { ldap: { a: 1 } } })).json(), invalid('Option a in group ldap is not supported for domain specific configurations'));
    t.same((await call('PUT', base, { config: { ldap: {} } })).json(), invalid('The value of group ldap specified in the config should be a dictionary of options'));
    t.same((await call('PUT', base, { config: { ldap: [] } })).json(), invalid('The value of group ldap specified in the config should be a dictionary of options'));
    const text = await call('PUT', base, { config: 'str' });
    t.equal(text.statusCode, 400);
    t.equal((await call('PUT', base, { config: 5 })).statusCode, 400);
    t.same((await call('PUT', '/v3/domains/nowhere/config', { config: { identity: { driver: 'ldap' } } })).json(), notFound('Could not find domain: nowhere.'));
    t.same((await call('GET', base)).json(), { config: { identity: { driver: 'ldap' }, ldap: { url: 'ldap://y' } } }, 'nothing was changed');
  });

  await t.test('PATCH merges; per group and per option with Keystone\'s rules', async (t) => {
    t.same((await call('PATCH', base, { config: { ldap: { user_tree_dn: 'ou=u' } } })).json(), {
      config: { identity: { driver: 'ldap' }, ldap: { url: 'ldap://y', user_tree_dn: 'ou=u' } },
    });
    t.same((await call('PATCH', `${base}/ldap`, { config: { ldap: { url: 'ldap://w' } } })).json(), {
      config: { identity: { driver: 'ldap' }, ldap: { url: 'ldap://w', user_tree_dn: 'ou=u' } },
    });
    t.same((await call('PATCH', `${base}/ldap/url`, { config: { url: 'ldap://v' } })).json(), {
      config: { identity: { driver: 'ldap' }, ldap: { url: 'ldap://v', user_tree_dn: 'ou=u' } },
    });
    t.same((await call('PATCH', base, { config: { ldap: { page_size: 'abc', password: 'new' } } })).json().config.ldap, { page_size: 'abc', url: 'ldap://v', user_tree_dn: 'ou=u' });
    t.same((await call('PATCH', `${base}/ldap`, { config: { url: 'ldap://w' } })).json(), invalid('The value of group url specified in the config should be a dictionary of options'));
    t.same((await call('PATCH', `${base}/identity`, { config: { ldap: { url: 'x' } } })).json(), invalid('request to update group identity, but config provided contains group ldap instead'));
    t.same(
      (await call('PATCH', `${base}/identity`, { config: { identity: { driver: 'sql' }, ldap: { url: 'x' } } })).json(),
      invalid('Trying to update group identity, so that, and only that, group must be specified in the config'),
    );
    t.same((await call('PATCH', `${base}/ldap/url`, { config: { user: 'x' } })).json(), invalid('Trying to update option url in group ldap, but config provided contains option user instead'));
    t.same(
      (await call('PATCH', `${base}/ldap/url`, { config: { url: 'x', user: 'y' } })).json(),
      invalid('Trying to update option url in group ldap, so that, and only that, option must be specified  in the config'),
    );
    t.same((await call('PATCH', `${base}/ldap/url`, { config: {} })).json(), invalid('The value of group ldap specified in the config should be a dictionary of options'));
    t.same((await call('PATCH', `${base}/ldap/url`, {})).json(), invalid('The value of group ldap specified in the config should be a dictionary of options'));
    t.same((await call('PATCH', base, { config: { foo: { x: 'y' } } })).json(), invalid('Group foo is not supported for domain specific configurations'));
    t.same((await call('PATCH', base, { config: { ldap: { nope: 'y' } } })).json(), invalid('Option nope in group ldap is not supported for domain specific configurations'));
    t.same((await call('PATCH', base, { x: {} })).json(), invalid('No options specified'));
    t.same((await call('PATCH', `${base}/ldap/user`, { config: { user: 'x' } })).json(), none('option user in group ldap'));
    t.same((await call('PATCH', '/v3/domains/nowhere/config', { config: { identity: { driver: 'ldap' } } })).json(), notFound('Could not find domain: nowhere.'));
  });

  await t.test('DELETE an option, a group, the whole configuration', async (t) => {
    t.equal((await call('DELETE', `${base}/ldap/user_tree_dn`)).statusCode, 204);
    t.same((await call('DELETE', `${base}/ldap/user_tree_dn`)).json(), none('option user_tree_dn in group ldap'));
    t.same((await call('DELETE', `${base}/foo`)).json(), invalid('Group foo is not supported for domain specific configurations'));
    t.same((await call('DELETE', `${base}/ldap/nope`)).json(), invalid('Option nope in group ldap is not supported for domain specific configurations'));
    t.equal((await call('DELETE', `${base}/identity`)).statusCode, 204);
    t.same((await call('GET', `${base}/identity`)).json(), none('group identity'));
    t.same((await call('DELETE', `${base}/identity`)).json(), none('group identity'));
    t.same((await call('PATCH', `${base}/identity`, { config: { identity: { driver: 'sql' } } })).json(), none('group identity'));
    t.equal((await call('DELETE', base)).statusCode, 204);
    t.equal((await call('DELETE', base)).statusCode, 204, 'no configuration is no error');
    t.same((await call('GET', base)).json(), none('any options'));
    t.same((await call('DELETE', '/v3/domains/nowhere/config')).json(), notFound('Could not find domain: nowhere.'));
    // A PATCH of the whole configuration creates it.
    t.same((await call('PATCH', base, { config: { identity: { driver: 'sql' } } })).json(), { config: { identity: { driver: 'sql' } } });
  });

  await t.test('unknown groups and options are refused before anything is read', async (t) => {
    t.same((await call('GET', `${base}/foo`)).json(), invalid('Group foo is not supported for domain specific configurations'));
    t.same((await call('GET', `${base}/foo/bar`)).json(), invalid('Group foo is not supported for domain specific configurations'));
    t.same((await call('GET', `${base}/ldap/bogus`)).json(), invalid('Option bogus in group ldap is not supported for domain specific configurations'));
  });

  await t.test('defaults', async (t) => {
    const all = (await call('GET', '/v3/domains/config/default')).json().config;
    t.same(Object.keys(all), ['identity', 'ldap']);
    t.same(all.identity, { driver: 'sql', list_limit: null });
    t.equal(all.ldap.url, 'ldap://localhost');
    t.notOk('password' in all.ldap, 'no sensitive option');
    t.same((await call('GET', '/v3/domains/config/identity/default')).json(), { config: { identity: { driver: 'sql', list_limit: null } } });
    t.same((await call('GET', '/v3/domains/config/ldap/url/default')).json(), { config: { url: 'ldap://localhost' } });
    t.same((await call('GET', '/v3/domains/config/ldap/password/default')).json(), invalid('Reading the default for option password in group ldap is not supported'));
    t.same((await call('GET', '/v3/domains/config/foo/default')).json(), invalid('Group foo is not supported for domain specific configurations'));
    t.same((await call('GET', '/v3/domains/config/ldap/nope/default')).json(), invalid('Option nope in group ldap is not supported for domain specific configurations'));
    t.same((await call('GET', '/v3/domains/config/security_compliance/default')).json(), invalid('Group security_compliance is not supported for domain specific configurations'));
  });

  await t.test('security_compliance: the default domain\'s password rules, for any token', async (t) => {
    const user = (await call('POST', '/v3/users', { user: { name: 'plain', password: 'Pw-1' } })).json().user;
    const plain = (await login({ id: user.id }, 'Pw-1')).token;
    t.same((await call('GET', '/v3/domains/default/config/security_compliance', undefined, plain)).json(), {
      config: { security_compliance: { password_regex: null, password_regex_description: null } },
    });
    t.same((await call('GET', '/v3/domains/default/config/security_compliance/password_regex', undefined, plain)).json(), { config: { password_regex: null } });
    t.same(
      (await call('GET', '/v3/domains/default/config/security_compliance/lockout_duration', undefined, plain)).json(),
      invalid('Reading security compliance values other than password_regex and password_regex_description is not allowed.'),
    );
    t.same(
      (await call('GET', `${base}/security_compliance`, undefined, plain)).json(),
      invalid('Reading security compliance information for any domain other than the default domain is not allowed or supported.'),
    );
    t.same((await call('PATCH', `${base}/security_compliance`, { config: { security_compliance: { x: 1 } } })).json(), invalid('Group security_compliance is not supported for domain specific configurations'));
  });

  await t.test('a non-admin gets 403 on every other route', async (t) => {
    const user = (await call('POST', '/v3/users', { user: { name: 'member', password: 'Pw-1' } })).json().user;
    const roles = Object.fromEntries((await call('GET', '/v3/roles')).json().roles.map((role: { name: string; id: string }) => [role.name, role.id]));
    const project = (await call('POST', '/v3/projects', { project: { name: 'p' } })).json().project;
    await call('PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${roles.member}`);
    const member = (await login({ id: user.id }, 'Pw-1', { project: { id: project.id } })).token;
    const body = { config: { identity: { driver: 'sql' } } };
    const cases: Array<[string, string, string, unknown?]> = [
      ['GET', base, 'get_domain_config'],
      ['PUT', base, 'create_domain_config', body],
      ['PATCH', base, 'update_domain_config', body],
      ['DELETE', base, 'delete_domain_config'],
      ['GET', `${base}/identity`, 'get_domain_config'],
      ['PATCH', `${base}/identity`, 'update_domain_config', body],
      ['DELETE', `${base}/identity`, 'delete_domain_config'],
      ['GET', `${base}/identity/driver`, 'get_domain_config'],
      ['PATCH', `${base}/identity/driver`, 'update_domain_config', { config: { driver: 'sql' } }],
      ['DELETE', `${base}/identity/driver`, 'delete_domain_config'],
      ['GET', '/v3/domains/config/default', 'get_domain_config_default'],
      ['GET', '/v3/domains/config/ldap/default', 'get_domain_config_default'],
      ['GET', '/v3/domains/config/ldap/url/default', 'get_domain_config_default'],
    ];
    for (const [method, url, rule, payload] of cases) {
      const answer = await call(method as 'GET', url, payload, member);
      t.equal(answer.statusCode, 403, `${method} ${url}`);
      t.equal(answer.json().error.message, `You are not authorized to perform the requested action: identity:${rule}.`);
    }
    t.same((await call('GET', base)).json(), { config: { identity: { driver: 'sql' } } }, 'nothing was changed');
    t.equal((await call('GET', base, undefined, null)).statusCode, 401);
  });

  await t.test('deleting the domain deletes its configuration', async (t) => {
    const gone = (await call('POST', '/v3/domains', { domain: { name: 'gone' } })).json().domain;
    t.equal((await call('PUT', `/v3/domains/${gone.id}/config`, { config: { ldap: { url: 'ldap://gone', password: 'x' } } })).statusCode, 201);
    await call('PATCH', `/v3/domains/${gone.id}`, { domain: { enabled: false } });
    t.equal((await call('DELETE', `/v3/domains/${gone.id}`)).statusCode, 204);
    t.same((await call('GET', `/v3/domains/${gone.id}/config`)).json(), notFound(`Could not find any options in domain configuration for domain ${gone.id}.`));
  });
});
