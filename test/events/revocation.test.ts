import t from 'tap';
import { Revocations, type RevocableToken } from '../../src/events/revocation.ts';
import type { Store } from '../../src/store/database.ts';
import { ManualClock } from '../helpers/clock.ts';
import { openTestStore } from '../helpers/store.ts';

/** A migrated store on a new database (removed at teardown) and a clock at a fixed time. */
async function freshStore(t: { teardown(fn: () => unknown): void }): Promise<{ store: Store; clock: ManualClock }> {
  const store = await openTestStore(t);
  return { store, clock: new ManualClock(Date.UTC(2026, 0, 1, 10, 0, 0)) };
}

t.test('revocation events match tokens by every attribute they carry', async (t) => {
  const { store, clock } = await freshStore(t);
  const revocations = new Revocations(store, clock);
  await revocations.load();

  const token = (overrides: Partial<RevocableToken> = {}): RevocableToken => ({
    userId: 'u1',
    userDomainId: 'd1',
    projectId: 'p1',
    assignmentDomainId: 'd2',
    roleIds: ['r1'],
    auditId: 'a1',
    auditChainId: 'a1',
    issuedAt: clock.now() - 1000,
    ...overrides,
  });

  await store.transaction((em) => revocations.record(em, { userId: 'u1' }));
  t.ok(revocations.isRevoked(token()), 'user event');
  t.notOk(revocations.isRevoked(token({ userId: 'u2' })), 'other user');
  t.ok(revocations.isRevoked(token({ issuedAt: clock.now() })), 'a token from the same second is revoked too, as in Keystone');
  t.notOk(revocations.isRevoked(token({ issuedAt: clock.now() + 1000 })), 'a later token is not');

  await store.transaction((em) => revocations.record(em, { projectId: 'p9', userId: 'u5' }));
  t.ok(revocations.isRevoked(token({ userId: 'u5', projectId: 'p9' })));
  t.notOk(revocations.isRevoked(token({ userId: 'u5', projectId: 'p1' })), 'every attribute must match');

  await store.transaction((em) => revocations.record(em, { domainId: 'd7' }));
  t.ok(revocations.isRevoked(token({ userId: 'x', userDomainId: 'd7' })), 'domain of the user');
  t.ok(revocations.isRevoked(token({ userId: 'x', assignmentDomainId: 'd7' })), 'domain of the scope');

  await store.transaction((em) => revocations.record(em, { auditId: 'aud' }));
  t.ok(revocations.isRevoked(token({ userId: 'x', auditId: 'aud' })));
  t.notOk(revocations.isRevoked(token({ userId: 'x', auditId: 'other', auditChainId: 'aud' })), 'audit_id is the token itself only');

  await store.transaction((em) => revocations.record(em, { roleId: 'r9' }));
  t.ok(revocations.isRevoked(token({ userId: 'x', roleIds: ['r0', 'r9'] })));

  // A fresh index loaded from the database sees the same events.
  const reloaded = new Revocations(store, clock);
  await reloaded.load();
  t.ok(reloaded.isRevoked(token()));
  t.ok(reloaded.isRevoked(token({ userId: 'x', auditId: 'aud' })));
  t.equal((await reloaded.list()).length, 5);
  t.equal((await reloaded.list(clock.now())).length, 0);

  // A rolled-back change leaves no event in the database.
  await t.rejects(
    store.transaction(async (em) => {
      await revocations.record(em, { userId: 'rolled-back' });
      throw new Error('abort');
    }),
  );
  const afterRollback = new Revocations(store, clock);
  await afterRollback.load();
  t.notOk(afterRollback.isRevoked(token({ userId: 'rolled-back' })));

  // The check costs the same with many events: they are filed by attribute, not scanned. (Recorded
  // 100 to a transaction: one unit of work holding all 2000 rows would make the test quadratic.)
  for (let batch = 0; batch < 20; batch++) {
    await store.transaction(async (em) => {
      for (let index = batch * 100; index < (batch + 1) * 100; index++) await revocations.record(em, { auditId: `bulk-${index}` });
    });
  }
  t.equal((await revocations.list()).length, 2005, 'the 2000 events are recorded');
  t.notOk(revocations.isRevoked(token({ userId: 'fresh', userDomainId: 'dx', projectId: 'px', assignmentDomainId: 'dy', roleIds: [], auditId: 'new', auditChainId: 'new' })));
});

t.test('a token found unrevoked is checked again once any event is indexed (recorded, caught up or reloaded)', async (t) => {
  const { store, clock } = await freshStore(t);
  const here = new Revocations(store, clock);
  const elsewhere = new Revocations(store, clock);
  await here.load();
  await elsewhere.load();

  // One object per token, as the validation cache holds it: the same object is asked every time.
  const cached: RevocableToken = { userId: 'u1', projectId: 'p1', roleIds: ['r1'], auditId: 'a1', auditChainId: 'c1', issuedAt: clock.now() - 1000 };
  const other: RevocableToken = { ...cached, userId: 'u2', auditId: 'a2', auditChainId: 'c2' };
  t.notOk(here.isRevoked(cached));
  t.notOk(here.isRevoked(cached), 'asked again with nothing new: still not revoked');

  await store.transaction((em) => here.record(em, { projectId: 'p9' }));
  t.notOk(here.isRevoked(cached), 'an event that does not match changes nothing');
  await store.transaction((em) => here.record(em, { roleId: 'r1' }));
  t.ok(here.isRevoked(cached), 'recorded here: the same object is revoked at once');

  t.notOk(elsewhere.isRevoked(other));
  await store.transaction((em) => here.record(em, { auditChainId: 'c2' }));
  t.notOk(elsewhere.isRevoked(other), 'another node has not read the event yet');
  t.equal(await elsewhere.catchUp(), 3);
  t.ok(elsewhere.isRevoked(other), 'caught up: revoked');

  const reloaded: RevocableToken = { ...cached, userId: 'u3', roleIds: [], auditId: 'a3', auditChainId: 'c3' };
  t.notOk(elsewhere.isRevoked(reloaded));
  await store.transaction((em) => here.record(em, { userId: 'u3' }));
  await elsewhere.load();
  t.ok(elsewhere.isRevoked(reloaded), 'reloaded from the database: revoked');
});

t.test('events applied from messages do not move where catching up starts', async (t) => {
  const { store, clock } = await freshStore(t);
  const here = new Revocations(store, clock);
  const elsewhere = new Revocations(store, clock);
  await here.load();
  await elsewhere.load();
  const token = (auditId: string): RevocableToken => ({ userId: 'u', roleIds: [], auditId, auditChainId: auditId, issuedAt: clock.now() - 1000 });
  const first = token('r1');
  // Another node, cut off from Redis, revokes R1: nobody is told.
  await store.transaction((em) => elsewhere.record(em, { auditId: 'r1' }));
  clock.advance(120_000);
  // Two minutes later a third node revokes R2: its message carries the event, applied here.
  const r2 = await store.transaction((em) => elsewhere.record(em, { auditId: 'r2' }));
  here.apply([r2]);
  t.ok(here.isRevoked(token('r2')), 'the carried event applies at once');
  t.notOk(here.isRevoked(first), 'R1 not read yet');
  await here.catchUp();
  t.ok(here.isRevoked(first), 'the catch-up still reads R1, written more than a minute before R2');

  // A message dated far ahead (a forged one, or a clock gone wrong) stops no later catch-up.
  here.apply([{ id: 1_000_000, auditId: 'forged', issuedBefore: clock.now(), revokedAt: clock.now() + 10 * 365 * 86_400_000 }]);
  const r3 = await store.transaction((em) => elsewhere.record(em, { auditId: 'r3' }));
  await here.catchUp();
  t.ok(here.isRevoked(token('r3')), 'read after a far-future carried event');

  // A carried event claiming the id the database gives next does not hide that event.
  here.apply([{ id: r3.id! + 1, auditId: 'harmless', issuedBefore: clock.now(), revokedAt: clock.now() }]);
  const r4 = await store.transaction((em) => elsewhere.record(em, { auditId: 'r4' }));
  t.equal(r4.id, r3.id! + 1);
  await here.catchUp();
  t.ok(here.isRevoked(token('r4')), 'the database’s event of that id is read');
});

t.test("a trust token: a user event matches its trustor and trustee too, a trust event its trust (Keystone's rules)", async (t) => {
  const { store, clock } = await freshStore(t);
  const revocations = new Revocations(store, clock);
  await revocations.load();
  const trustToken = (overrides: Partial<RevocableToken> = {}): RevocableToken => ({
    userId: 'trustee',
    projectId: 'p1',
    roleIds: ['r1'],
    auditId: 'a1',
    auditChainId: 'a1',
    trustId: 't1',
    trustorId: 'trustor',
    trusteeId: 'trustee',
    issuedAt: clock.now() - 1000,
    ...overrides,
  });
  await store.transaction((em) => revocations.record(em, { userId: 'trustor' }));
  t.ok(revocations.isRevoked(trustToken()), 'the trustor revoked: its trust tokens go');
  t.notOk(revocations.isRevoked(trustToken({ trustorId: 'someone-else' })), 'another trustor: not');
  t.notOk(revocations.isRevoked({ userId: 'trustee', roleIds: [], auditId: 'x', auditChainId: 'x', issuedAt: clock.now() - 1000 }), "the trustee's own tokens: not");
  await store.transaction((em) => revocations.record(em, { trustId: 't2' }));
  t.ok(revocations.isRevoked(trustToken({ trustId: 't2', trustorId: 'other' })), 'the trust deleted');
  t.notOk(revocations.isRevoked(trustToken({ trustId: 't3', trustorId: 'other' })), 'another trust');
});
