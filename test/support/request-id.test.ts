import t from 'tap';
import { drawRequestId, newRequestId, requestIdText } from '../../src/support/request-id.ts';

t.test('newRequestId: req- and a version 4 uuid, a different one every time, across refills of the pool', async (t) => {
  const seen = new Set<string>();
  const version4 = /^req-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
  let malformed = 0;
  // 2,000 ids: the pool (256 ids) is refilled several times.
  for (let count = 0; count < 2_000; count++) {
    const id = newRequestId();
    if (!version4.test(id)) malformed++;
    seen.add(id);
  }
  t.equal(malformed, 0, 'every id is req-<uuid4>');
  t.equal(seen.size, 2_000, 'no id repeats');
  // The hex digits are random: over 2,000 ids each of the 16 values turns up in every free position.
  const first = newRequestId();
  t.not(first, newRequestId());
  const digits = new Set([...seen].map((id) => id[4]));
  t.equal(digits.size, 16, 'the first digit takes all 16 values');
});

t.test('newRequestId: the string handed out is not changed by the next id', async (t) => {
  const first = newRequestId();
  const copy = `${first}`;
  newRequestId();
  t.equal(first, copy);
});

t.test('requestIdText: the req-<uuid> of 16 bytes, whatever the scratch buffer held before', async (t) => {
  const scratch = Buffer.alloc(40, 'z');
  const bytes = Uint8Array.from([0, 0, 0xde, 0xad, 0xbe, 0xef, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xf0, 0x0f, 0xff, 0x10]);
  t.equal(requestIdText(bytes, 2, scratch), 'req-deadbeef-0123-4567-89ab-cdeff00fff10');
});

t.test('drawRequestId: the id with the bytes it was written from, which no later id writes over', async (t) => {
  const drawn = Array.from({ length: 1_000 }, () => drawRequestId());
  const scratch = Buffer.alloc(40);
  // 1,000 ids: the pool (256 ids) is refilled several times after the first were drawn.
  t.equal(drawn.filter(({ text, bytes, at }) => requestIdText(bytes, at, scratch) !== text).length, 0, 'every id still reads back from its bytes');
  t.equal(new Set(drawn.map(({ text }) => text)).size, 1_000);
  t.match(drawn[0]!.text, /^req-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
});
