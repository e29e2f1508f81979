import t from 'tap';
import { DriverException, UniqueConstraintViolationException } from '@mikro-orm/core';
import { UnavailableError } from '../../src/support/errors.ts';
import { databaseUnavailable, databaseUnreachableReason } from '../../src/store/unavailable.ts';

// Error shapes as pg, knex and MikroORM produce them (the e2e fault tests meet the real ones).
const withCode = (message: string, code: string) => Object.assign(new Error(message), { code });
// knex prefixes the statement, with its values, to the driver's message.
const fromKnex = (sql: string, message: string) => new Error(`${sql} - ${message}`);

t.test('connection failures are the database being unreachable', async (t) => {
  const unreachable: [string, unknown][] = [
    ['refused', withCode('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED')],
    ['reset', withCode('read ECONNRESET', 'ECONNRESET')],
    ['ended during a query', fromKnex('select 1', 'Connection terminated unexpectedly')],
    ['ended while connecting', new Error('Connection terminated unexpectedly')],
    ['connect timeout', new Error('timeout expired')],
    ['broken client', new Error('Client has encountered a connection error and is not queryable')],
    ['pool timeout', Object.assign(new Error('Knex: Timeout acquiring a connection. The pool is probably full. Are you missing a .transacting(trx) call?'), { name: 'KnexTimeoutError' })],
    ['BEGIN lost with its connection', new Error('Transaction query already complete, run with DEBUG=knex:tx for more info')],
    ['silent connection dropped by the store', fromKnex('insert into "project" ("name") values (\'x\')', 'database read timeout: no answer from PostgreSQL in 5000 ms')],
    ['server shutting down', withCode('terminating connection due to administrator command', '57P01')],
    ['server starting', withCode('the database system is starting up', '57P03')],
    ['too many connections', withCode('sorry, too many clients already', '53300')],
    ['connection exception class', withCode('connection failure', '08006')],
    ['wrapped by MikroORM', new DriverException(withCode('read ECONNRESET', 'ECONNRESET'))],
    ['as a cause', new Error('outer', { cause: withCode('connect ECONNREFUSED', 'ECONNREFUSED') })],
  ];
  for (const [what, error] of unreachable) {
    t.ok(databaseUnreachableReason(error), what);
    const mapped = databaseUnavailable(error);
    t.ok(mapped instanceof UnavailableError, `${what}: a typed 503`);
    t.match(mapped?.message, /database cannot be reached/);
  }
});

t.test('other errors are not', async (t) => {
  const others: [string, unknown][] = [
    ['a unique violation', new UniqueConstraintViolationException(withCode('duplicate key value violates unique constraint', '23505'))],
    // A value the client chose cannot make a statement error look like an outage.
    ['client text in a failed statement', withCode(`insert into "project" ("name") values ('x - Connection terminated unexpectedly') - value too long`, '22001')],
    ['client text at the end of a statement', fromKnex(`select * from "project" where "name" = 'Connection terminated unexpectedly'`, 'syntax error at or near "x"')],
    ['a query canceled by statement_timeout', withCode('canceling statement due to statement timeout', '57014')],
    ['a bug', new TypeError('Cannot read properties of undefined')],
    ['not an error', 'ECONNRESET'],
    ['nothing', undefined],
  ];
  for (const [what, error] of others) {
    t.equal(databaseUnreachableReason(error), undefined, what);
    t.equal(databaseUnavailable(error), undefined, what);
  }
  const typed = new UnavailableError('already typed');
  t.equal(databaseUnavailable(typed), typed, 'a typed UnavailableError is kept as it is');
});

t.test('the reason never carries the statement or its values', async (t) => {
  const reason = databaseUnreachableReason(fromKnex(`insert into "password" ("password_hash") values ('$2b$12$secret')`, 'Connection terminated unexpectedly'));
  t.equal(reason, 'Connection terminated unexpectedly');
});
