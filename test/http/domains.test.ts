import t from 'tap';
import { ProjectEntity, UserEntity } from '../../src/store/entities.ts';
import { PUBLIC_URL, startTestApp } from '../helpers/app.ts';

t.test('domains', async (t) => {
  const { call, app } = await startTestApp(t);

  const created = await call('POST', '/v3/domains', { domain: { name: 'd1', description: 'first', tier: 'gold' } });
  t.equal(created.statusCode, 201);
  const domain = created.json().domain;
  t.match(domain, { name: 'd1', description: 'first', enabled: true, tags: [], options: {}, tier: 'gold' });
  t.match(domain.id, /^[0-9a-f]{32}$/);
  t.equal(domain.links.self, `${PUBLIC_URL}/v3/domains/${domain.id}`);

  const duplicate = await call('POST', '/v3/domains', { domain: { name: 'd1' } });
  t.equal(duplicate.statusCode, 409);
  t.equal(
    duplicate.json().error.message,
    'Conflict occurred attempting to store project - it is not permitted to have two projects acting as domains with the same name: d1.',
  );

  const list = await call('GET', '/v3/domains?enabled');
  t.equal(list.statusCode, 200);
  t.same(list.json().domains.map((d: { name: string }) => d.name).sort(), ['Default', 'd1']);
  t.same(list.json().links, { self: `${PUBLIC_URL}/v3/domains?enabled`, previous: null, next: null });
  const byPrefix = await call('GET', '/v3/domains?name__startswith=d');
  t.same(byPrefix.json().domains.map((d: { name: string }) => d.name), ['d1']);
  const caseless = await call('GET', '/v3/domains?name__icontains=DEFAU');
  t.same(caseless.json().domains.map((d: { name: string }) => d.name), ['Default']);

  const got = await call('GET', `/v3/domains/${domain.id}`);
  t.equal(got.statusCode, 200);
  t.same(got.json().domain, domain);

  const missing = await call('GET', '/v3/domains/nope');
  t.equal(missing.statusCode, 404);
  t.equal(missing.json().error.message, 'Could not find domain: nope.');

  const explicitBad = await call('POST', '/v3/domains', { domain: { name: 'd2', explicit_domain_id: 'not-a-uuid' } });
  t.equal(explicitBad.statusCode, 400);
  t.equal(explicitBad.json().error.message, 'Domain ID does not conform to required UUID format.');
  const explicitId = 'ABCDEF0123456789abcdef0123456789';
  const explicit = await call('POST', '/v3/domains', { domain: { name: 'd2', explicit_domain_id: explicitId } });
  t.equal(explicit.statusCode, 201);
  t.equal(explicit.json().domain.id, explicitId.toLowerCase());

  const user = await call('POST', '/v3/users', { user: { name: 'in-d1', domain_id: domain.id } });
  t.equal(user.statusCode, 201);
  const project = await call('POST', '/v3/projects', { project: { name: 'p-in-d1', domain_id: domain.id } });
  t.equal(project.statusCode, 201);

  const enabledDelete = await call('DELETE', `/v3/domains/${domain.id}`);
  t.equal(enabledDelete.statusCode, 403);
  t.equal(enabledDelete.json().error.message, 'Cannot delete a domain that is enabled, please disable it first.');

  const disabled = await call('PATCH', `/v3/domains/${domain.id}`, { domain: { enabled: false, description: 'off' } });
  t.equal(disabled.statusCode, 200);
  t.match(disabled.json().domain, { enabled: false, description: 'off', tier: 'gold' });
  const onlyDisabled = await call('GET', '/v3/domains?enabled=false');
  t.same(onlyDisabled.json().domains.map((d: { id: string }) => d.id), [domain.id]);

  const deleted = await call('DELETE', `/v3/domains/${domain.id}`);
  t.equal(deleted.statusCode, 204);
  t.equal(deleted.body, '');
  t.equal((await call('GET', `/v3/domains/${domain.id}`)).statusCode, 404);
  // The domain's projects and users went with it, in the same transaction.
  const em = app.store.reader();
  t.equal(await em.count(ProjectEntity, { domainId: domain.id }), 0);
  t.equal(await em.count(UserEntity, { domainId: domain.id }), 0);
  t.equal(await em.count(ProjectEntity, { id: domain.id }), 0);

  const renameClash = await call('PATCH', `/v3/domains/${explicitId.toLowerCase()}`, { domain: { name: 'Default' } });
  t.equal(renameClash.statusCode, 409);
});

t.test('immutable domains refuse update and delete until the option is cleared', async (t) => {
  const { call } = await startTestApp(t);
  const domain = (await call('POST', '/v3/domains', { domain: { name: 'locked', options: { immutable: true } } })).json().domain;
  t.same(domain.options, { immutable: true });
  const update = await call('PATCH', `/v3/domains/${domain.id}`, { domain: { description: 'x' } });
  t.equal(update.statusCode, 403);
  t.match(update.json().error.message, /^Unable to update immutable domain resource/);
  const unlock = await call('PATCH', `/v3/domains/${domain.id}`, { domain: { options: { immutable: false }, enabled: false } });
  t.equal(unlock.statusCode, 200);
  t.equal((await call('DELETE', `/v3/domains/${domain.id}`)).statusCode, 204);
});
