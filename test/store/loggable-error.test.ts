import t from 'tap';
import { Store } from '../../src/store/database.ts';
import { loggableError } from '../../src/store/loggable-error.ts';

const SECRET = '$2b$12$secretsecretsecretsecretsecretsecretsecretsecretsecre';

t.test('a database error is logged by its codes, never by the statement and its values', async (t) => {
  const store = await Store.open({ embeddedDirectory: 'memory' });
  t.teardown(() => store.close());
  const error = await store.orm.em
    .getConnection()
    .execute('select ?::int as n', [SECRET])
    .then(
      () => undefined,
      (caught: unknown) => caught,
    );
  t.ok(error, 'the query fails');
  t.match(String((error as Error).message), SECRET, 'the driver puts the value in the message (why this exists)');
  const logged = JSON.stringify(loggableError(error));
  t.notMatch(logged, 'secretsecret', 'the value is not logged');
  t.notMatch(logged, 'select', 'the statement is not logged');
  t.match(JSON.parse(logged), { code: '22P02' }, 'the SQLSTATE is');
});

t.test('other errors are logged whole', async (t) => {
  const error = new TypeError('cannot read x of undefined');
  t.equal(loggableError(error), error);
  t.equal(loggableError('text'), 'text');
});
