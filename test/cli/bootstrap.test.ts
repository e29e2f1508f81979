import t from 'tap';
import { bootstrap } from '../../src/cli/bootstrap.ts';
import { AssignmentEntity, EndpointEntity, ProjectEntity, RoleEntity, UserEntity } from '../../src/store/entities.ts';
import { ADMIN_PASSWORD, startTestApp } from '../helpers/app.ts';

t.test('bootstrap seeds what Keystone seeds, and is idempotent', async (t) => {
  const { app, call, login } = await startTestApp(t);
  const em = app.store.reader();
  t.same(await em.findOne(ProjectEntity, { id: 'default' }, { fields: ['name', 'description', 'isDomain'] }), {
    id: 'default',
    name: 'Default',
    description: 'The default domain',
    isDomain: true,
  });
  const roles = await em.find(RoleEntity, {});
  t.same(roles.map((role) => role.name).sort(), ['admin', 'member', 'reader']);
  const admin = (await em.find(UserEntity, { name: 'admin' }))[0]!;
  const grants = await em.find(AssignmentEntity, { actorId: admin.id });
  t.same(grants.map((grant) => grant.targetType).sort(), ['project', 'system']);
  const inferences = (await call('GET', '/v3/role_inferences')).json().role_inferences;
  t.same(
    inferences.map((entry: { prior_role: { name: string }; implies: { name: string }[] }) => `${entry.prior_role.name}>${entry.implies.map((r) => r.name).join(',')}`).sort(),
    ['admin>member', 'member>reader'],
  );

  const again = await bootstrap(app, { adminPassword: ADMIN_PASSWORD, publicUrl: app.config.publicUrl });
  t.same(again.changes, [], 'a second run changes nothing');
  t.notOk(again.generatedAdminPassword);
  t.equal(await em.count(RoleEntity, {}), 3);
  t.equal(await em.count(EndpointEntity, {}), 3);

  // A moved service: the identity endpoints follow the new public URL.
  const moved = await bootstrap(app, { adminPassword: ADMIN_PASSWORD, publicUrl: 'http://moved.test:5000' });
  t.equal(moved.changes.filter((change) => change.startsWith('moved')).length, 3);
  const endpoints = await app.store.reader().find(EndpointEntity, {});
  t.ok(endpoints.every((endpoint) => endpoint.url === 'http://moved.test:5000/v3'));

  // An explicit ADMIN_PASSWORD wins over a changed password, as with keystone-manage bootstrap.
  await call('PATCH', `/v3/users/${admin.id}`, { user: { password: 'changed-elsewhere' } });
  t.equal((await login({ id: admin.id }, ADMIN_PASSWORD)).status, 401);
  const reset = await bootstrap(app, { adminPassword: ADMIN_PASSWORD, publicUrl: 'http://moved.test:5000' });
  t.same(reset.changes, ['reset the admin password to ADMIN_PASSWORD']);
  t.equal((await login({ id: admin.id }, ADMIN_PASSWORD)).status, 201);
});

t.test('without ADMIN_PASSWORD a new admin gets a generated password, returned once', async (t) => {
  const { app, call, login } = await startTestApp(t);
  const admin = (await call('GET', '/v3/users?name=admin')).json().users[0];
  t.equal((await call('DELETE', `/v3/users/${admin.id}`)).statusCode, 204);
  const result = await bootstrap(app, { publicUrl: app.config.publicUrl });
  t.match(result.generatedAdminPassword, /^[A-Za-z0-9_-]{24}$/);
  t.equal((await login({ name: 'admin', domain: { name: 'Default' } }, result.generatedAdminPassword!, { system: { all: true } })).status, 201);
  const second = await bootstrap(app, { publicUrl: app.config.publicUrl });
  t.notOk(second.generatedAdminPassword, 'never generated or shown again');
});
