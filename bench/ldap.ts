/**
 * npm run bench:ldap — listing the users of an LDAP domain (issue 16 item 5), against the figures
 * real Keystone 22 gave on this machine (shared/peers/ldap/README.md: 1,005 users, the first call
 * 1.79 s as it writes 1,000 id_mapping rows, later calls median 123 ms).
 *
 * Starts a private slapd with BENCH_LDAP_USERS generated users (default 1,000; the seed adds 5), the
 * service on the embedded default, configures a domain through the domain config API, and times
 * `GET /v3/users?domain_id=…` over HTTP: the first call, then BENCH_LDAP_RUNS more (default 20).
 * Then the same for a token validation of a directory user (no directory round trip on a cache hit).
 */
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { cleanup, freePort, installSignalHandlers, onCleanup, ROOT, startService, tempDirectory } from './processes.ts';

const users = Number(process.env.BENCH_LDAP_USERS ?? 1000);
const runs = Number(process.env.BENCH_LDAP_RUNS ?? 20);
const log = (message: string) => process.stderr.write(`bench:ldap: ${message}\n`);

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function timed(run: () => Promise<Response>): Promise<{ ms: number; status: number; bytes: number }> {
  const started = performance.now();
  const response = await run();
  const body = await response.arrayBuffer();
  return { ms: performance.now() - started, status: response.status, bytes: body.byteLength };
}

async function main(): Promise<void> {
  installSignalHandlers(() => {});
  const peerScripts = path.join(ROOT, 'test', 'helpers', 'ldap-peer');
  const ldapPort = await freePort();
  const ldapDirectory = tempDirectory('kg-bench-ldap-');
  const ldapEnv = { ...process.env, LDAP_PORT: String(ldapPort), LDAP_PEER_DIR: ldapDirectory, LDAP_USERS: String(users) };
  log(`starting slapd with ${users} generated users`);
  execFileSync('bash', [path.join(peerScripts, 'start.sh')], { env: ldapEnv, stdio: 'ignore' });
  onCleanup('stop slapd', () => void execFileSync('bash', [path.join(peerScripts, 'stop.sh')], { env: ldapEnv, stdio: 'ignore' }));

  const adminPassword = 'bench-ldap-admin';
  const policyDirectory = path.join(ROOT, 'policies');
  const service = await startService({ adminPassword, policyDirectory });
  const base = `${service.url}/v3`;
  const json = { 'content-type': 'application/json' };
  const login = await fetch(`${base}/auth/tokens`, {
    method: 'POST',
    headers: json,
    body: JSON.stringify({
      auth: {
        identity: { methods: ['password'], password: { user: { name: 'admin', domain: { id: 'default' }, password: adminPassword } } },
        scope: { project: { name: 'admin', domain: { id: 'default' } } },
      },
    }),
  });
  const token = login.headers.get('x-subject-token')!;
  const auth = { 'x-auth-token': token };
  const domain = (await (await fetch(`${base}/domains`, { method: 'POST', headers: { ...auth, ...json }, body: JSON.stringify({ domain: { name: 'ldap' } }) })).json()) as { domain: { id: string } };
  const suffix = 'dc=example,dc=org';
  const config = {
    identity: { driver: 'ldap' },
    ldap: {
      url: `ldap://127.0.0.1:${ldapPort}`, user: `cn=admin,${suffix}`, password: 'ldap-secret', suffix, query_scope: 'one',
      user_tree_dn: `ou=Users,${suffix}`, user_objectclass: 'inetOrgPerson', user_id_attribute: 'uid', user_name_attribute: 'uid',
      user_mail_attribute: 'mail', user_enabled_attribute: 'employeeType', group_tree_dn: `ou=Groups,${suffix}`,
      group_objectclass: 'groupOfNames', group_id_attribute: 'cn', group_name_attribute: 'cn', group_member_attribute: 'member',
    },
  };
  const put = await fetch(`${base}/domains/${domain.domain.id}/config`, { method: 'PUT', headers: { ...auth, ...json }, body: JSON.stringify({ config }) });
  if (put.status !== 201) throw new Error(`domain config: HTTP ${put.status} ${await put.text()}`);

  const list = () => fetch(`${base}/users?domain_id=${domain.domain.id}`, { headers: auth });
  const first = await timed(list);
  const later: number[] = [];
  let bytes = first.bytes;
  for (let run = 0; run < runs; run += 1) {
    const result = await timed(list);
    if (result.status !== 200) throw new Error(`list: HTTP ${result.status}`);
    later.push(result.ms);
    bytes = result.bytes;
  }

  const userLogin = await fetch(`${base}/auth/tokens`, {
    method: 'POST',
    headers: json,
    body: JSON.stringify({ auth: { identity: { methods: ['password'], password: { user: { name: 'alice', domain: { name: 'ldap' }, password: 'alice-secret' } } } } }),
  });
  const aliceToken = userLogin.headers.get('x-subject-token')!;
  const validate = () => fetch(`${base}/auth/tokens`, { headers: { ...auth, 'x-subject-token': aliceToken } });
  await timed(validate);
  const validations: number[] = [];
  for (let run = 0; run < runs; run += 1) validations.push((await timed(validate)).ms);
  // A cache hit needs no directory: with slapd stopped the token still validates.
  execFileSync('bash', [path.join(peerScripts, 'stop.sh')], { env: ldapEnv, stdio: 'ignore' });
  const withoutDirectory = await timed(validate);

  const round = (ms: number) => Math.round(ms * 10) / 10;
  console.log(`\nLDAP domain, ${users + 5} users (slapd, embedded service), ${runs} runs each:\n`);
  console.log(`GET /v3/users?domain_id=<ldap>   first call ${round(first.ms)} ms (status ${first.status}; Keystone 22 here: 1,790 ms)`);
  console.log(`                                 later: min ${round(Math.min(...later))}, median ${round(median(later))}, max ${round(Math.max(...later))} ms, ${Math.round(bytes / 1024)} KB (Keystone 22 here: median 123 ms)`);
  console.log(`GET /v3/auth/tokens (an LDAP user's token)   median ${round(median(validations))} ms; with slapd stopped: HTTP ${withoutDirectory.status} in ${round(withoutDirectory.ms)} ms`);
}

main()
  .catch((error: unknown) => {
    process.stderr.write(`bench:ldap failed: ${(error as Error).stack ?? String(error)}\n`);
    process.exitCode = 1;
  })
  .finally(() => cleanup());
