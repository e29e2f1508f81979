import t from 'tap';
import type { FernetTokenProvider } from '../../src/token/fernet-provider.ts';
import { ADMIN_PASSWORD, startTestApp } from '../helpers/app.ts';

t.test('two key rotations under load: every token inside the active key window keeps validating', async (t) => {
  const { app, login, call } = await startTestApp(t, { FERNET_MAX_ACTIVE_KEYS: '4' });
  const provider = app.tokenProvider as FernetTokenProvider;
  const admin = { name: 'admin', domain: { id: 'default' } };
  const scope = { project: { name: 'admin', domain: { id: 'default' } } };
  const issued: string[] = [];
  const failures: string[] = [];
  let stop = false;

  // Clients issue and validate continuously while the keys rotate twice.
  const client = async () => {
    while (!stop) {
      const session = await login(admin, ADMIN_PASSWORD, scope);
      if (session.status !== 201) failures.push(`issue ${session.status}`);
      else issued.push(session.token);
      const sample = issued[Math.floor(Math.random() * issued.length)];
      if (sample) {
        const response = await call('GET', '/v3/auth/tokens', undefined, session.token, { 'x-subject-token': sample });
        if (response.statusCode !== 200) failures.push(`validate ${response.statusCode}`);
      }
    }
  };
  const clients = [client(), client(), client(), client()];
  const waitForTokens = async (count: number) => {
    while (issued.length < count) await new Promise((resolve) => setImmediate(resolve));
  };
  await waitForTokens(20);
  provider.repository.rotate();
  provider.reload();
  await waitForTokens(40);
  provider.repository.rotate();
  provider.reload();
  await waitForTokens(60);
  stop = true;
  await Promise.all(clients);

  t.same(failures, [], 'no request failed during the rotations');
  const fresh = await login(admin, ADMIN_PASSWORD, scope);
  let valid = 0;
  for (const token of issued) {
    if ((await call('GET', '/v3/auth/tokens', undefined, fresh.token, { 'x-subject-token': token })).statusCode === 200) valid++;
  }
  t.equal(valid, issued.length, `all ${issued.length} tokens, issued under three primary keys, still validate`);
});
