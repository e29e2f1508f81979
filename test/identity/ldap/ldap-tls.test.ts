import fs from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { performance } from 'node:perf_hooks';
import t, { type Test } from 'tap';
import { startTestApp, type TestApp } from '../../helpers/app.ts';
import { MemoryDomainConfigs } from '../../helpers/domain-configs.ts';
import { LDAP_UNAVAILABLE as UNAVAILABLE, SEED_USERS, createDomain, ldapDomainConfig, startLdapPeer } from '../../helpers/ldap.ts';

// The LDAP back end over TLS against a real slapd in start.sh's TLS mode (its own throwaway CA, a
// server certificate for 127.0.0.1): ldaps:// and StartTLS (use_tls) with tls_cacertfile, Keystone's
// tls_req_cert (demand verifies; allow and never do not), and a certificate that does not verify
// refused with a Keystone-shaped 503 before any password is sent. slapd's stats log proves that
// every connection the back end made really was encrypted.

interface Connection {
  port: number;
  startTls: boolean;
  /** DNs bound on it (the request line). */
  binds: string[];
  /** Successful binds with the security strength slapd saw for the connection (0: cleartext). */
  boundSsf: Array<{ dn: string; ssf: number }>;
}

/**
 * The connections slapd logged after `offset` (bytes into its stats log), by conn number. slapd
 * writes its log from several threads, so lines can come out of order or late; the line of a
 * successful bind (`mech=SIMPLE bind_ssf=0 ssf=N`, written before the answer is sent) carries the
 * connection's encryption strength at that bind: that is what the tests judge.
 */
function connectionsSince(logFile: string, offset: number): Map<string, Connection> {
  const text = fs.readFileSync(logFile).subarray(offset).toString('utf8');
  const lines = text.split('\n');
  const connections = new Map<string, Connection>();
  // Two passes: a connection's first operation can be logged before its ACCEPT line.
  for (const line of lines) {
    const accept = /conn=(\d+) fd=\d+ ACCEPT from IP=\S+ \(IP=[\d.]+:(\d+)\)/.exec(line);
    if (accept) connections.set(accept[1]!, { port: Number(accept[2]), startTls: false, binds: [], boundSsf: [] });
  }
  for (const line of lines) {
    const conn = /conn=(\d+) /.exec(line)?.[1];
    const known = conn === undefined ? undefined : connections.get(conn);
    if (!known) continue;
    if (/ op=\d+ STARTTLS$/.test(line)) known.startTls = true;
    const bind = / op=\d+ BIND dn="([^"]*)" method=/.exec(line);
    if (bind) known.binds.push(bind[1]!);
    const bound = / op=\d+ BIND dn="([^"]*)" mech=SIMPLE bind_ssf=\d+ ssf=(\d+)/.exec(line);
    if (bound) known.boundSsf.push({ dn: bound[1]!, ssf: Number(bound[2]) });
  }
  return connections;
}

const ALICE_DN = 'uid=alice,ou=Users,dc=example,dc=org';

/**
 * slapd's connections since `offset` once its log holds the lines `ready` needs: slapd writes its
 * log from several threads and not always before it answers, so under load a line can trail the
 * answer. This polls slapd's file (an external process), never the app's clock; what the log still
 * lacks after 5 s is judged by the caller's assertions.
 */
async function loggedConnections(logFile: string, offset: number, ready: (connections: Connection[]) => boolean): Promise<Map<string, Connection>> {
  for (let waited = 0; ; waited += 50) {
    const connections = connectionsSince(logFile, offset);
    if (ready([...connections.values()]) || waited >= 5000) return connections;
    await delay(50);
  }
}

/** Every successful bind on the connection was over an encrypted connection. */
function encrypted(connection: Connection): boolean {
  return connection.boundSsf.length > 0 && connection.boundSsf.every((bind) => bind.ssf > 0);
}

t.test('LDAPS and StartTLS against a TLS directory', async (t) => {
  const peer = await startLdapPeer(t, { tls: true });
  const ldapsUrl = peer.ldapsUrl!;
  const caFile = peer.caFile!;
  const ldapsPort = Number(new URL(ldapsUrl).port);
  const configs = new MemoryDomainConfigs();
  const app = await startTestApp(t, {}, { domainIdentityConfigs: configs });
  const timeouts = { connection_timeout: '2', operation_timeout: '2' };

  /** A new domain with `ldap` options; lists its users and logs alice in; returns slapd's connections meanwhile that carried a bind. */
  async function serves(t: Test, name: string, url: string, ldap: Record<string, string>, startTls = false): Promise<Map<string, Connection>> {
    const domainId = await createDomain(app, name);
    configs.set(domainId, ldapDomainConfig(url, { ...timeouts, ...ldap }));
    const offset = fs.statSync(peer.logFile).size;
    const users = await app.call('GET', `/v3/users?domain_id=${domainId}`);
    t.equal(users.statusCode, 200, `users listed (${users.statusCode === 200 ? "200" : users.body})`);
    t.same(
      users.json().users.map((user: { name: string }) => user.name),
      SEED_USERS.map((seed) => seed.name),
    );
    const alice = await app.login({ name: 'alice', domain: { name } }, 'alice-secret');
    t.equal(alice.status, 201, 'alice logs in: her password is checked by a bind');
    const wrong = await app.login({ name: 'alice', domain: { name } }, 'not-her-password');
    t.equal(wrong.status, 401, 'a wrong password is still refused');
    // Logged: alice's bind and another's (the configured user's), and STARTTLS wherever expected.
    const logged = await loggedConnections(peer.logFile, offset, (connections) => {
      const bound = connections.filter((connection) => connection.boundSsf.length > 0);
      return (
        bound.some((connection) => connection.boundSsf.some((bind) => bind.dn === ALICE_DN)) &&
        bound.some((connection) => connection.boundSsf.some((bind) => bind.dn !== ALICE_DN)) &&
        (!startTls || bound.every((connection) => connection.startTls))
      );
    });
    const bound = new Map([...logged].filter(([, connection]) => connection.boundSsf.length > 0));
    t.ok(bound.size >= 2, `slapd saw the back end's binds succeed: the configured user's and alice's (${bound.size} connections)`);
    t.ok(
      [...bound.values()].some((connection) => connection.boundSsf.some((bind) => bind.dn === ALICE_DN)),
      'alice was bound on one of them',
    );
    return bound;
  }

  /** A new domain with `ldap` options whose certificate check must fail: 503 quickly, and no bind ever reached slapd. */
  async function refused(t: Test, name: string, url: string, ldap: Record<string, string>, reachesSlapd = true): Promise<void> {
    const domainId = await createDomain(app, name);
    configs.set(domainId, ldapDomainConfig(url, { ...timeouts, ...ldap }));
    const offset = fs.statSync(peer.logFile).size;
    let start = performance.now();
    const users = await app.call('GET', `/v3/users?domain_id=${domainId}`);
    const listMs = performance.now() - start;
    t.equal(users.statusCode, 503, "users: 503");
    t.same(users.json(), UNAVAILABLE);
    t.ok(listMs < 4000, `answered in ${Math.round(listMs)} ms`);
    start = performance.now();
    const alice = await app.login({ name: 'alice', domain: { name } }, 'alice-secret');
    const loginMs = performance.now() - start;
    t.equal(alice.status, 503);
    t.same(alice.body, UNAVAILABLE);
    t.ok(loginMs < 4000, `answered in ${Math.round(loginMs)} ms`);
    const connections = connectionsSince(peer.logFile, offset);
    if (reachesSlapd) t.ok(connections.size >= 1, 'the back end did reach slapd');
    t.same(
      [...connections.values()].flatMap((connection) => connection.binds),
      [],
      'no bind (no password) was sent over a connection whose certificate did not verify',
    );
  }

  await t.test('ldaps:// with tls_cacertfile: users listed, alice logs in, every bind encrypted', async (t) => {
    const connections = await serves(t, 'ldaps-ca', ldapsUrl, { tls_cacertfile: caFile, tls_req_cert: 'demand' });
    for (const [conn, connection] of connections) {
      t.equal(connection.port, ldapsPort, `conn=${conn} on the ldaps port`);
      t.ok(encrypted(connection), `conn=${conn}: every bind encrypted (ssf > 0)`, { binds: connection.boundSsf });
    }
  });

  await t.test('use_tls (StartTLS) on ldap:// with tls_cacertfile: same, every bind on a connection upgraded before it', async (t) => {
    const connections = await serves(t, 'starttls-ca', peer.url, { use_tls: 'true', tls_cacertfile: caFile }, true);
    for (const [conn, connection] of connections) {
      t.equal(connection.port, peer.port, `conn=${conn} on the plain port`);
      t.ok(connection.startTls && encrypted(connection), `conn=${conn}: STARTTLS, then every bind encrypted`, { binds: connection.boundSsf });
    }
    // And the log does show binds in the clear when TLS is not asked for: the check above can fail.
    const plain = await serves(t, 'plain', peer.url, {});
    t.ok(
      [...plain.values()].every((connection) => !connection.startTls && connection.boundSsf.every((bind) => bind.ssf === 0)),
      'a plain domain: no TLS in the log',
    );
  });

  await t.test('tls_req_cert = demand and a certificate that does not verify: 503, no password sent', async (t) => {
    await t.test('ldaps://, an unrelated CA', (t) => refused(t, 'ldaps-other-ca', ldapsUrl, { tls_cacertfile: peer.otherCaFile!, tls_req_cert: 'demand' }));
    await t.test('ldaps://, no CA file (the system CAs)', (t) => refused(t, 'ldaps-no-ca', ldapsUrl, { tls_req_cert: 'demand' }));
    await t.test('StartTLS, an unrelated CA', (t) =>
      refused(t, 'starttls-other-ca', peer.url, { use_tls: 'true', tls_cacertfile: peer.otherCaFile!, tls_req_cert: 'demand' }),
    );
    await t.test('StartTLS, no CA file (demand is the default)', (t) => refused(t, 'starttls-no-ca', peer.url, { use_tls: 'true' }));
    // Keystone raises an IOError (a 500) when tls_cacertfile is not a file; here the domain's directory is unavailable.
    await t.test('a tls_cacertfile that does not exist: 503, never a 500', (t) =>
      refused(t, 'ldaps-missing-ca', ldapsUrl, { tls_cacertfile: `${caFile}.missing` }, false),
    );
  });

  await t.test('tls_req_cert = never or allow: the certificate is not verified (Keystone / OpenLDAP semantics)', async (t) => {
    const never = await serves(t, 'ldaps-never', ldapsUrl, { tls_req_cert: 'never' });
    t.ok([...never.values()].every(encrypted), 'ldaps never: encrypted');
    const allow = await serves(t, 'starttls-allow', peer.url, { use_tls: 'true', tls_req_cert: 'allow', tls_cacertfile: peer.otherCaFile! }, true);
    t.ok([...allow.values()].every((connection) => connection.startTls && encrypted(connection)), 'StartTLS allow (a CA that does not match): encrypted');
  });
});

t.test("tls_req_cert = demand checks the certificate's name against the URL's host (StartTLS and ldaps)", async (t) => {
  // A certificate from the right CA, but only for "localhost": 127.0.0.1 is not its name.
  const peer = await startLdapPeer(t, { tls: true, tlsSubjectAltName: 'DNS:localhost' });
  const configs = new MemoryDomainConfigs();
  const app = await startTestApp(t, {}, { domainIdentityConfigs: configs });
  for (const [name, url, ldap] of [
    ['starttls-wrong-name', peer.url, { use_tls: 'true', tls_cacertfile: peer.caFile! }],
    ['ldaps-wrong-name', peer.ldapsUrl!, { tls_cacertfile: peer.caFile! }],
  ] as const) {
    const domainId = await createDomain(app, name);
    configs.set(domainId, ldapDomainConfig(url, { connection_timeout: '2', operation_timeout: '2', ...ldap }));
    const users = await app.call('GET', `/v3/users?domain_id=${domainId}`);
    t.equal(users.statusCode, 503, `${name}: refused`);
    t.same(users.json(), UNAVAILABLE);
    const alice = await app.login({ name: 'alice', domain: { name } }, 'alice-secret');
    t.equal(alice.status, 503, `${name}: alice cannot log in`);
  }
  // The same certificate is taken when its name is not checked (never).
  const domainId = await createDomain(app, 'starttls-never');
  configs.set(domainId, ldapDomainConfig(peer.url, { use_tls: 'true', tls_cacertfile: peer.caFile!, tls_req_cert: 'never' }));
  t.equal((await app.call('GET', `/v3/users?domain_id=${domainId}`)).statusCode, 200);
});
