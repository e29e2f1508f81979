import t from 'tap';
import { OIDC_USERS, startOidcPeer } from './oidc-peer.ts';
import { takenPortFirst } from './processes.ts';

t.test('a provider whose port was taken before it could bind it is started on another', async (t) => {
  // Taken as an outgoing connection takes it: start.sh's check for listeners passes, the bind fails.
  const { taken, offered, ports } = await takenPortFirst(t);
  const peer = await startOidcPeer(t, { ports });
  t.equal(offered.length, 2, 'a second port was asked for');
  t.equal(offered[0], taken);
  t.equal(peer.issuer, `http://127.0.0.1:${offered[1]}`, 'the provider listens on the second');
  const tokens = await peer.tokens('alice');
  t.equal(tokens.token_type, 'Bearer', `a password grant for alice (${Object.keys(OIDC_USERS).length} users) answers`);
});
