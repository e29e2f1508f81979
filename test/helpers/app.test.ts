import t from 'tap';
import { startListeningTestApp } from './app.ts';
import { takenPortFirst } from './processes.ts';

t.test('a listening test app whose port was taken before it listened is started on another', async (t) => {
  const { taken, offered, ports } = await takenPortFirst(t);
  const { testApp, base } = await startListeningTestApp(t, (base) => ({ PUBLIC_URL: base }), { ports });
  t.equal(offered.length, 2, 'a second port was asked for');
  t.equal(offered[0], taken);
  t.equal(base, `http://127.0.0.1:${offered[1]}`);
  t.equal(testApp.config.publicUrl, base, 'PUBLIC_URL names the port it listens on');
  const response = await fetch(`${base}/v3`);
  t.equal(response.status, 200);
  t.match((await response.json()) as object, { version: { links: [{ rel: 'self', href: `${base}/v3/` }] } });
});
