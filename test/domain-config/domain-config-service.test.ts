import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { pino } from 'pino';
import { domainConfigOfIni } from '../../src/domain-config/domain-config-files.ts';
import { startTestApp } from '../helpers/app.ts';
import { waitFor } from '../helpers/processes.ts';

function capturedLog() {
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => lines.push(JSON.parse(line)) });
  return { logger, lines };
}

t.test('an INI file\'s [identity] and [ldap] options, typed as Keystone\'s options', async (t) => {
  const skipped: string[] = [];
  const groups = domainConfigOfIni(
    [
      '# a comment',
      '[DEFAULT]',
      'debug = true',
      '[identity]',
      'driver = ldap',
      '[ldap]',
      'url = ldap://dir.example:389',
      'password = s3cret=with=equals',
      'use_tls = True',
      'page_size = 50',
      'pool_retry_delay = 0.5',
      'user_attribute_ignore = default_project_id, enabled',
      'user_filter =',
      'bogus = 1',
      '[assignment]',
      'driver = sql',
    ].join('\n'),
    (group, option) => skipped.push(`${group}.${option}`),
  );
  t.same(groups, {
    identity: { driver: 'ldap' },
    ldap: {
      url: 'ldap://dir.example:389',
      password: 's3cret=with=equals',
      use_tls: true,
      page_size: 50,
      pool_retry_delay: 0.5,
      user_attribute_ignore: ['default_project_id', 'enabled'],
      user_filter: '',
    },
  });
  t.same(skipped, ['DEFAULT.debug', 'ldap.bogus', 'assignment.driver']);
});

t.test('DOMAIN_CONFIG_DIR: file-configured domains, read-only through the API; unknown names skipped', async (t) => {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-domain-config-'));
  t.teardown(() => fs.rmSync(directory, { recursive: true, force: true }));
  // (Default keeps the SQL driver: the bootstrap creates its admin through it. The [ldap] options are read all the same.)
  fs.writeFileSync(path.join(directory, 'keystone.Default.conf'), '[identity]\ndriver = sql\n[ldap]\nurl = ldap://default.example\npassword = file-secret\nuse_tls = false\n[foo]\nx = 1\n');
  fs.writeFileSync(path.join(directory, 'keystone.nowhere.conf'), '[identity]\ndriver = ldap\n');
  fs.writeFileSync(path.join(directory, 'keystone.late.conf'), '[ldap]\nurl = ldap://late.example\n');
  fs.writeFileSync(path.join(directory, 'keystone.empty.conf'), '[DEFAULT]\nx = 1\n');
  fs.writeFileSync(path.join(directory, 'README'), 'not a domain file');
  const log = capturedLog();
  const { app, call } = await startTestApp(t, { DOMAIN_CONFIG_DIR: directory }, { logger: log.logger });
  const configs = app.domainConfigs;

  // The Default domain was made by the bootstrap, after the files were read: found then.
  await waitFor(async () => configs.configured().has('default'), 'the Default domain\'s file to apply', 5000);
  t.same(configs.configured().get('default'), { identity: { driver: 'sql' }, ldap: { url: 'ldap://default.example', password: 'file-secret', use_tls: false } }, 'the back end gets the password');
  t.same((await call('GET', '/v3/domains/default/config')).json(), { config: { identity: { driver: 'sql' }, ldap: { url: 'ldap://default.example', use_tls: false } } }, 'the API never shows it');
  t.same((await call('GET', '/v3/domains/default/config/ldap/password')).statusCode, 404);
  const refused = {
    error: {
      code: 403,
      title: 'Forbidden',
      message: 'Invalid domain specific configuration: The configuration of domain default is read from the file keystone.Default.conf and cannot be changed through the API.',
    },
  };
  t.same((await call('PUT', '/v3/domains/default/config', { config: { identity: { driver: 'sql' } } })).json(), refused);
  t.same((await call('PATCH', '/v3/domains/default/config/ldap/url', { config: { url: 'ldap://other' } })).json(), refused);
  t.same((await call('DELETE', '/v3/domains/default/config')).json(), refused);
  t.equal((await call('GET', '/v3/domains/default/config/ldap/url')).json().config.url, 'ldap://default.example', 'unchanged');

  // A domain created later whose file is there is configured by it.
  const late = (await call('POST', '/v3/domains', { domain: { name: 'late' } })).json().domain;
  await waitFor(async () => configs.configured().has(late.id), 'the late domain\'s file to apply', 5000);
  t.same(configs.configured().get(late.id), { ldap: { url: 'ldap://late.example' } });

  // The directory is watched: a file edited, added or removed takes effect without a restart.
  const told: string[] = [];
  configs.onChange((domainId) => told.push(domainId));
  fs.writeFileSync(path.join(directory, 'keystone.late.conf'), '[ldap]\nurl = ldap://late2.example\n');
  await waitFor(async () => configs.configured().get(late.id)?.ldap?.url === 'ldap://late2.example', 'the edited file to apply', 5000);
  const added = (await call('POST', '/v3/domains', { domain: { name: 'added' } })).json().domain;
  t.equal((await call('PUT', `/v3/domains/${added.id}/config`, { config: { identity: { driver: 'sql' } } })).statusCode, 201, 'configured through the API first');
  fs.writeFileSync(path.join(directory, 'keystone.added.conf'), '[identity]\ndriver = ldap\n');
  await waitFor(async () => configs.configured().get(added.id)?.identity?.driver === 'ldap', 'the new file to apply', 5000);
  t.same((await call('GET', `/v3/domains/${added.id}/config`)).json(), { config: { identity: { driver: 'ldap' } } }, 'the file wins over what the API stored');
  fs.rmSync(path.join(directory, 'keystone.late.conf'));
  await waitFor(async () => !configs.configured().has(late.id), 'the removed file to stop applying', 5000);
  t.equal((await call('PUT', `/v3/domains/${late.id}/config`, { config: { identity: { driver: 'sql' } } })).statusCode, 201, 'the domain is configurable through the API again');
  t.ok(told.includes(late.id) && told.includes(added.id), 'listeners were told');

  const warnings = log.lines.map((line) => `${line.msg} ${line.file ?? ''} ${line.group ?? ''}`);
  t.ok(warnings.some((w) => w.startsWith('domain configuration file skipped: no domain has this name') && w.includes('keystone.nowhere.conf')), 'an unknown domain name is logged');
  t.ok(warnings.some((w) => w.includes('option skipped') && w.includes(' foo')), 'an unknown group is logged');
  t.ok(warnings.some((w) => w.includes('sets no option') && w.includes('keystone.empty.conf')));
  t.notOk(JSON.stringify(log.lines).includes('file-secret'), 'the password is never logged');
  t.equal((await call('GET', '/healthz')).statusCode, 200, 'the service runs');
});

t.test('the map of configured domains follows the API, with listeners told which domain changed', async (t) => {
  const { app, call } = await startTestApp(t);
  const configs = app.domainConfigs;
  const told: string[] = [];
  configs.onChange((domainId) => told.push(domainId));
  const domain = (await call('POST', '/v3/domains', { domain: { name: 'corp' } })).json().domain;
  t.same(told, [], 'a new domain without configuration changes nothing');
  t.notOk(configs.configured().has(domain.id));

  // Keystone substitutes %(option)s references to sensitive options in the full configuration.
  t.equal(
    (await call('PUT', `/v3/domains/${domain.id}/config`, { config: { identity: { driver: 'ldap' }, ldap: { url: 'ldap://corp', user: 'cn=%(password)s', password: 'pw' } } })).statusCode,
    201,
  );
  t.same(told, [domain.id], 'told once the PUT is answered');
  t.same(configs.configured().get(domain.id), { identity: { driver: 'ldap' }, ldap: { password: 'pw', url: 'ldap://corp', user: 'cn=pw' } });
  t.equal((await call('GET', `/v3/domains/${domain.id}/config/ldap/user`)).json().config.user, 'cn=%(password)s', 'the API shows the reference');

  await call('PATCH', `/v3/domains/${domain.id}/config/ldap/url`, { config: { url: 'ldap://corp2' } });
  t.same(told, [domain.id, domain.id]);
  t.equal(configs.configured().get(domain.id)?.ldap?.url, 'ldap://corp2');

  // A write that changes nothing of the configuration tells nobody.
  await call('PATCH', `/v3/domains/${domain.id}/config/ldap/url`, { config: { url: 'ldap://corp2' } });
  t.equal(told.length, 2);

  t.equal((await call('DELETE', `/v3/domains/${domain.id}/config`)).statusCode, 204);
  t.same(told, [domain.id, domain.id, domain.id]);
  t.notOk(configs.configured().has(domain.id));

  // Deleting a domain drops its configuration from the map too.
  await call('PUT', `/v3/domains/${domain.id}/config`, { config: { identity: { driver: 'ldap' } } });
  await call('PATCH', `/v3/domains/${domain.id}`, { domain: { enabled: false } });
  t.equal((await call('DELETE', `/v3/domains/${domain.id}`)).statusCode, 204);
  await waitFor(async () => !configs.configured().has(domain.id), 'the deleted domain to leave the map', 5000);
  t.same(told, [domain.id, domain.id, domain.id, domain.id, domain.id]);
});
