import t from 'tap';
import { buildMatrixWorld, expectedVerdict, IdentityClient, PERSONAS, PROTECTION_MATRIX, runCell } from '../helpers/protection-matrix.ts';
import { PEER_PASSWORD, PEER_URL, peerUp } from '../helpers/keystone-peer.ts';

// The protection matrix against the real Keystone 22 (../shared/peers/keystone/start.sh): the table
// this service is tested with must be what Keystone does, cell by cell. Skipped without a peer.

// ~1,150 cells, each a request to Keystone (and fresh entities): far more than the default file timeout.
t.setTimeout(900_000);
const skip = (await peerUp()) ? false : `no Keystone peer at ${PEER_URL} (start ../shared/peers/keystone/start.sh)`;

t.test('Keystone 22 decides the protection matrix as this service does', { skip, timeout: 900_000 }, async (t) => {
  const world = await buildMatrixWorld(new IdentityClient(PEER_URL), 'admin', PEER_PASSWORD);
  for (const row of PROTECTION_MATRIX) {
    for (const persona of PERSONAS) {
      const { verdict, answer } = await runCell(world, row, persona);
      const expected = expectedVerdict(row, persona);
      t.equal(verdict, expected, `${row.method} ${row.path}${row.subject ? ` (${row.subject} token)` : ''} as ${persona}${verdict === expected ? '' : `: Keystone answered ${answer.status} ${JSON.stringify(answer.body)}`}`);
    }
  }
});
