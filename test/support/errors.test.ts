import t from 'tap';
import {
  AuthenticationError,
  ConflictError,
  errorEnvelope,
  ForbiddenError,
  NotFoundError,
  NotImplementedError,
  statusOf,
  TooManyRequestsError,
  UnavailableError,
  ValidationError,
} from '../../src/support/errors.ts';

t.test('each error kind has one status', async (t) => {
  t.equal(statusOf(new ValidationError('x')), 400);
  t.equal(statusOf(new AuthenticationError()), 401);
  t.equal(statusOf(ForbiddenError.action()), 403);
  t.equal(statusOf(NotFoundError.of('user', 'u1')), 404);
  t.equal(statusOf(new ConflictError('user', 'Duplicate entry')), 409);
  t.equal(statusOf(new TooManyRequestsError(3)), 429);
  t.equal(statusOf(new NotImplementedError()), 501);
  t.equal(statusOf(new UnavailableError()), 503);
  t.equal(statusOf('not_found'), 404);
});

t.test("Keystone's envelope", async (t) => {
  t.same(JSON.parse(errorEnvelope(404, 'Could not find user: u1.')), {
    error: { code: 404, title: 'Not Found', message: 'Could not find user: u1.' },
  });
  t.same(JSON.parse(errorEnvelope(401, 'no', { identity: { methods: ['totp'] } })), {
    error: { code: 401, title: 'Unauthorized', message: 'no', identity: { methods: ['totp'] } },
  });
  t.equal(JSON.parse(errorEnvelope(599, 'odd')).error.title, 'Error');
});

t.test('recurring messages belong to their kind', async (t) => {
  const error = NotFoundError.tokenNotValidated();
  t.equal(error.message, 'Failed to validate token');
  t.equal(statusOf(error), 404);
  t.equal(NotFoundError.of('project', 'p1').message, 'Could not find project: p1.');
  t.equal(NotFoundError.implication('r1', 'r2').message, 'r1 does not imply r2.');
  t.equal(ValidationError.blankName().message, "Invalid input for field 'name': the name must contain a non-space character.");
  t.equal(ValidationError.field('expires_at', 'not an ISO 8601 time').message, "Invalid input for field 'expires_at': not an ISO 8601 time");
  t.equal(ValidationError.domainChange().message, 'Cannot change Domain ID');
  t.equal(ValidationError.idOrName('scope/project').message, 'Invalid input for field scope/project: id or name must be present.');
  t.equal(ConflictError.duplicateName('user', 'alice', 'default').message, 'Conflict occurred attempting to store user - Duplicate entry found with name alice at domain ID default.');
  t.equal(ConflictError.duplicateName('role', 'reader').message, 'Conflict occurred attempting to store role - Duplicate entry found with name reader.');
});
