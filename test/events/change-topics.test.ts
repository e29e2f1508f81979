import t from 'tap';
import { CACHE_TOPICS, CHANGE_TOPICS, topicsOfWrites, type ChangeTopic } from '../../src/events/change-topics.ts';
import { ClusterSync } from '../../src/events/cluster-sync.ts';
import type { Revocations } from '../../src/events/revocation.ts';
import type { EntityManager, Store, TableWrites } from '../../src/store/database.ts';
import { DatabaseHealth } from '../../src/store/database-health.ts';
import { classify, TableWriteRecorder } from '../../src/store/table-writes.ts';
import { ManualClock } from '../helpers/clock.ts';
import { FakeBus } from '../helpers/event-bus.ts';

// Typed change events: what a transaction wrote (read from its statements) → the topics it changed
// → the generations of the caches holding those topics, here and on the other nodes. The real
// database and caches are in change-events.test.ts.

function writesOf(...statements: string[]): TableWrites {
  const recorder = new TableWriteRecorder();
  for (const sql of statements) recorder.record(sql);
  return recorder;
}

const sorted = (topics: Iterable<ChangeTopic>) => [...topics].sort();

t.test('statements: the table each writes, and how', async (t) => {
  t.same(classify('insert into "identity_user" ("id", "name") values ($1, $2) returning "id"'), { table: 'identity_user', kind: 'insert' });
  t.same(classify('update "service" set "description" = $1 where "id" = $2'), { table: 'service', kind: 'update' });
  t.same(classify('delete from "group_membership" where "user_id" = $1'), { table: 'group_membership', kind: 'delete' });
  t.same(classify('  update access_epoch set value = value + 1 where id = 1 returning value'), { table: 'access_epoch', kind: 'update' }, 'raw SQL, unquoted');
  t.same(classify('insert into "public"."region" ("id") values ($1)'), { table: 'region', kind: 'insert' }, 'schema-qualified');
  t.same(classify('insert into token_key_generation (provider, generation) values (?, 0) on conflict (provider) do update set generation = 1'), { table: 'token_key_generation', kind: 'update' }, 'an upsert updates');
  t.equal(classify('select "u0".* from "identity_user" as "u0" where "u0"."id" = $1 for update'), 'read');
  t.equal(classify('select pg_advisory_xact_lock(hashtext($1))'), 'read');
  t.equal(classify('savepoint trx2'), 'read');
  t.equal(classify('select 1; delete from "role_assignment"'), 'unknown', 'several statements in one: unknown');
  t.same(classify('delete from "role_assignment" where "id" = $1;  '), { table: 'role_assignment', kind: 'delete' }, 'a trailing semicolon is one statement');
  t.equal(classify('with gone as (delete from role returning id) select * from gone'), 'unknown', 'a statement whose writes cannot be told');
});

t.test('writes → topics', async (t) => {
  t.same(sorted(topicsOfWrites(writesOf('update "service" set "enabled" = false where "id" = $1'))), ['catalog'], 'a catalog write');
  t.same(sorted(topicsOfWrites(writesOf('insert into "endpoint" ("id") values ($1)', 'insert into "region" ("id") values ($1)'))), ['catalog']);
  t.same(sorted(topicsOfWrites(writesOf('update "identity_user" set "name" = $1 where "id" = $2'))), ['identity'], 'an identity write');
  t.same(sorted(topicsOfWrites(writesOf('insert into "identity_user" ("id") values ($1)'))), ['identity-added'], 'a new user: only lookups by name or id may change');
  t.same(sorted(topicsOfWrites(writesOf('insert into "project" ("id") values ($1)'))), ['resource-added']);
  t.same(
    sorted(topicsOfWrites(writesOf('insert into "identity_user" ("id") values ($1)', 'insert into "password" ("user_id") values ($1)'))),
    ['identity-added'],
    'a new user with its password: validated tokens are kept (they cannot refer to it)',
  );
  t.same(
    sorted(topicsOfWrites(writesOf('update "password" set "expires_at" = $1 where "id" = $2', 'insert into "password" ("user_id") values ($1)'))),
    ['identity', 'identity-added'],
    'a password change expires the row before it: validated tokens are dropped',
  );
  t.same(sorted(topicsOfWrites(writesOf('delete from "password" where "id" = $1', 'insert into "password" ("user_id") values ($1)'))), ['identity', 'identity-added'], 'or removes it');
  t.same(
    sorted(topicsOfWrites(writesOf('delete from "project" where "id" = $1'))),
    ['assignment', 'catalog', 'credential', 'domain-config', 'identity', 'resource'],
    'a deleted domain or project takes (by cascade and trigger) its users, groups, roles, assignments, credentials, endpoint-filter associations and domain configuration',
  );
  t.same(sorted(topicsOfWrites(writesOf('insert into "domain_config_option" ("domain_id") values ($1)'))), ['assignment', 'domain-config', 'identity'], 'a domain\'s configuration: its back end, so its users, memberships and tokens');
  t.same(sorted(topicsOfWrites(writesOf('delete from "identity_user" where "id" = $1'))), ['assignment', 'credential', 'identity']);
  t.same(sorted(topicsOfWrites(writesOf('delete from "group_membership" where "user_id" = $1'))), ['assignment', 'identity'], 'memberships give roles');
  t.same(sorted(topicsOfWrites(writesOf('insert into "revocation_event" ("id") values ($1)'))), ['revocation']);
  t.same(
    sorted(topicsOfWrites(writesOf('insert into "project_endpoint" ("endpoint_id") values ($1)', 'delete from "project_endpoint_group" where "project_id" = $1', 'update "endpoint_group" set "filters" = $1'))),
    ['catalog'],
    'OS-EP-FILTER associations and endpoint groups decide catalogs',
  );
  t.same(
    sorted(topicsOfWrites(writesOf('insert into "registered_limit" ("id") values ($1)', 'update "limit" set "resource_limit" = $1 where "id" = $2', 'delete from "limit" where "id" = $1'))),
    [],
    'unified limits: no cache holds them (a known table, not "anything")',
  );
  t.same(sorted(topicsOfWrites(writesOf('select 1'))), [], 'nothing written, nothing changed');
  t.same(
    sorted(topicsOfWrites(writesOf('insert into "policy" ("id") values ($1)', 'delete from "policy_association" where "policy_id" = $1', 'delete from "policy" where "id" = $1'))),
    [],
    'policy blobs and their endpoint associations: no cache holds them',
  );
  t.same(sorted(topicsOfWrites(writesOf('delete from "endpoint" where "id" = $1'))), ['catalog'], 'an endpoint deleted (its associations go by cascade)');
  t.same(sorted(topicsOfWrites(writesOf('insert into "some_new_table" ("id") values ($1)'))), sorted(CHANGE_TOPICS), 'an unmapped table: every topic');
  t.same(sorted(topicsOfWrites(writesOf('truncate "role"'))), sorted(CHANGE_TOPICS), 'an unknown statement: every topic');
  t.same(sorted(topicsOfWrites(undefined)), sorted(CHANGE_TOPICS), 'writes not known: every topic');
  t.notOk((CACHE_TOPICS.tokenValidation as readonly string[]).includes('catalog'), 'validated tokens hold no catalog');
  // Effective roles are made of assignments, memberships, roles and the project tree: every write of those drops them, a catalog write does not.
  const effectiveRoles = new Set<string>(CACHE_TOPICS.effectiveRoles);
  for (const statement of [
    'insert into "role_assignment" ("type") values ($1)',
    'insert into "group_membership" ("user_id") values ($1)',
    'insert into "implied_role" ("prior_role_id") values ($1)',
    'update "project" set "parent_id" = $1',
    'delete from "role" where "id" = $1',
  ]) {
    t.ok([...topicsOfWrites(writesOf(statement))].some((topic) => effectiveRoles.has(topic)), `effective roles drop on: ${statement}`);
  }
  t.notOk([...topicsOfWrites(writesOf('update "endpoint" set "url" = $1'))].some((topic) => effectiveRoles.has(topic)), 'effective roles kept on a catalog write');
});

function setup(options: { teardown?: (stop: () => void) => void } = {}) {
  const listeners: ((em: EntityManager, writes?: TableWrites) => void)[] = [];
  const probe = { fails: false };
  const health = new DatabaseHealth(async () => {
    if (probe.fails) throw Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
  }, { probeIntervalMs: 1000 });
  if (options.teardown) {
    health.start();
    options.teardown(() => health.stop());
  }
  const store = { onCommit: (listener: (em: EntityManager, writes?: TableWrites) => void) => listeners.push(listener), health } as unknown as Store;
  const revocations = {
    catchUp: async () => 0,
    eventRecordedIn: () => undefined,
    eventsRecordedIn: () => [],
    apply: () => {},
  };
  const bus = new FakeBus();
  const sync = new ClusterSync(store, revocations as unknown as Revocations, bus, { error: () => {} }, { clock: new ManualClock() });
  sync.start();
  const commit = (writes?: TableWrites) => listeners.forEach((listener) => listener({} as EntityManager, writes));
  // One generation per cache, as app.ts wires them.
  const generations = {
    validation: () => sync.validationGeneration,
    catalog: sync.generationOf(CACHE_TOPICS.catalog),
    identity: sync.generationOf(CACHE_TOPICS.identity),
    resource: sync.generationOf(CACHE_TOPICS.resource),
    credential: sync.epochOf(CACHE_TOPICS.credential),
  };
  const read = () => ({
    validation: generations.validation(),
    catalog: generations.catalog(),
    identity: generations.identity(),
    resource: generations.resource(),
    credential: generations.credential.generation,
    all: sync.generation,
  });
  /** Which generations moved since `before`. */
  const moved = (before: ReturnType<typeof read>) => {
    const now = read();
    return (Object.keys(now) as (keyof typeof now)[]).filter((name) => now[name] !== before[name]).sort();
  };
  return { sync, bus, commit, read, moved, health, probe };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

t.test('a commit bumps the generations of the topics it wrote and tells the others which', async (t) => {
  const { bus, commit, read, moved } = setup();
  let before = read();
  commit(writesOf('update "service" set "description" = $1 where "id" = $2'));
  t.same(moved(before), ['all', 'catalog'], 'a catalog write: token validations (and users, projects, credentials) kept');
  t.same(bus.published.at(-1), { type: 'changed', topics: ['catalog'] });

  before = read();
  commit(writesOf('update "identity_user" set "enabled" = false where "id" = $1'));
  t.same(moved(before), ['all', 'identity', 'validation'], 'an identity write: token validations dropped, catalogs kept');
  t.same(bus.published.at(-1), { type: 'changed', topics: ['identity'] });

  before = read();
  commit(writesOf('insert into "project" ("id") values ($1)'));
  t.same(moved(before), ['all', 'resource'], 'a new project: lookups of projects only');

  before = read();
  const published = bus.published.length;
  commit(writesOf('select 1'));
  t.same(moved(before), [], 'a transaction that wrote nothing');
  t.equal(bus.published.length, published, 'tells no one');

  before = read();
  commit();
  t.same(moved(before), ['all', 'catalog', 'credential', 'identity', 'resource', 'validation'], 'writes not known: everything');
  t.same(bus.published.at(-1), { type: 'changed' }, 'no topics said: every topic');
});

t.test('another node’s message for a topic bumps only that topic', async (t) => {
  const { bus, read, moved } = setup();
  let before = read();
  bus.handlers!.message({ type: 'changed', topics: ['catalog'] });
  await tick();
  t.same(moved(before), ['all', 'catalog'], 'catalog: token validations kept');

  before = read();
  bus.handlers!.message({ type: 'changed', topics: ['resource-added'] });
  await tick();
  t.same(moved(before), ['all', 'resource'], 'a new project: lookups of projects only');

  before = read();
  bus.handlers!.message({ type: 'revoked', eventId: 3, topics: [] });
  await tick();
  t.same(moved(before), ['all', 'validation'], 'a revocation, whatever its topics say');

  before = read();
  bus.handlers!.message({ type: 'changed' });
  await tick();
  t.same(moved(before), ['all', 'catalog', 'credential', 'identity', 'resource', 'validation'], 'no topics (an older node): every topic');

  before = read();
  bus.handlers!.message({ type: 'changed', topics: ['catalog', 'federation'] as unknown as ChangeTopic[] });
  await tick();
  t.same(moved(before), ['all', 'catalog', 'credential', 'identity', 'resource', 'validation'], 'a topic this node does not know (a newer node): every topic');
});

t.test('when what changed is not known, every topic is bumped', async (t) => {
  const { sync, bus, read, moved, health, probe } = setup({ teardown: (stop) => t.teardown(stop) });
  const everything = ['all', 'catalog', 'credential', 'identity', 'resource', 'validation'];
  let before = read();
  bus.handlers!.reconnected();
  await tick();
  t.same(moved(before), everything, 'Redis back after an outage: messages may have been missed');

  // A partition during which Redis was lost too: what changed meanwhile is read again.
  probe.fails = true;
  health.markUnreachable('database read timeout');
  bus.connected = false;
  bus.connected = true;
  bus.handlers!.reconnected();
  probe.fails = false;
  await tick();
  before = read();
  await health.runProbe();
  t.equal(health.reachable, true);
  await tick();
  t.same(moved(before), everything, 'recovery from the partition');

  before = read();
  sync.invalidate();
  t.same(moved(before), ['all', 'validation'], 'token keys reloaded: token validations only');
});
