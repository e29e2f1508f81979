import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { ADMIN_PASSWORD, startListeningTestApp } from '../helpers/app.ts';
import { PEER_PASSWORD, PEER_URL, peerUp } from '../helpers/keystone-peer.ts';
import { PYTHON } from '../helpers/oauth1-signer.ts';

// keystoneclient's OS-OAUTH1 flow (Debian's python3-keystoneclient and python3-oauthlib, the client
// OpenStack tools use) against this service, and against the real Keystone 22 when one is up: both
// must see the same. The client signs the URL it calls, so the service's PUBLIC_URL is that address.
const SCRIPT = path.join(import.meta.dirname, 'keystoneclient-oauth1.py');
const run = async (url: string, password: string) => JSON.parse((await promisify(execFile)(PYTHON, [SCRIPT, url, password], { timeout: 120_000 })).stdout);

t.test('keystoneclient delegates through OS-OAUTH1', async (t) => {
  const { base } = await startListeningTestApp(t, (base) => ({ PUBLIC_URL: base }));
  const ours = await run(`${base}/v3`, ADMIN_PASSWORD);
  t.same(ours, {
    listed: [true],
    oauth: { access_token_id: true, consumer_id: true },
    token_methods: ['oauth1'],
    token_project: true,
    token_roles: ['reader'],
    token_user: true,
  });
  if (await peerUp()) t.same(await run(`${PEER_URL}/v3`, PEER_PASSWORD), ours, 'the real Keystone answers keystoneclient the same');
});
