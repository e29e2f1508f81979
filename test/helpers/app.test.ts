import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { startListeningTestApp, startTestApp } from './app.ts';
import { SCRATCH_DIRECTORY } from './embedded-template.ts';
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

t.test('a test app keeps its data directory and embedded database on the memory file system where there is one', async (t) => {
  const hasShm = (() => {
    try {
      fs.accessSync('/dev/shm', fs.constants.W_OK);
      return true;
    } catch {
      return false;
    }
  })();
  t.equal(SCRATCH_DIRECTORY, hasShm ? '/dev/shm' : os.tmpdir());
  const app = await startTestApp(t);
  t.equal(path.dirname(app.config.dataDir), SCRATCH_DIRECTORY, `data directory ${app.config.dataDir}`);
  if (!app.config.databaseUrl) t.ok(fs.existsSync(path.join(app.config.dataDir, 'test-pglite', 'PG_VERSION')), 'the embedded database copied into it');
  await app.close();
  t.notOk(fs.existsSync(app.config.dataDir), 'and removed at close');
});
