import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { DomainConfigGroups } from '../../src/identity/domain-identity-config.ts';
import type { TestApp } from './app.ts';
import { freePort, PortTakenError, startOnFreePort } from './processes.ts';

const run = promisify(execFile);
const PEER = path.join(import.meta.dirname, 'ldap-peer');

export const LDAP_SUFFIX = 'dc=example,dc=org';
export const LDAP_ADMIN_DN = `cn=admin,${LDAP_SUFFIX}`;
export const LDAP_ADMIN_PASSWORD = 'ldap-secret';

/** What a domain whose directory cannot be reached (or whose certificate does not verify) answers. */
export const LDAP_UNAVAILABLE = {
  error: { code: 503, title: 'Service Unavailable', message: 'The identity directory service of this domain is unavailable; retry later.' },
};

/** A new domain through the API (its identity back end comes from its domain configuration). */
export async function createDomain(app: TestApp, name: string): Promise<string> {
  const response = await app.call('POST', '/v3/domains', { domain: { name } });
  if (response.statusCode !== 201) throw new Error(`domain ${name}: ${response.statusCode} ${response.body}`);
  return response.json().domain.id as string;
}

/** The seed's users in directory order, as Keystone shows them (dave has no mail and no description). */
export const SEED_USERS = [
  { name: 'alice', enabled: true, email: 'alice@example.org', description: 'Developer and admin' },
  { name: 'bob', enabled: true, email: 'bob@example.org', description: 'Developer' },
  { name: 'carol', enabled: true, email: 'carol@example.org' },
  { name: 'dave', enabled: true },
  { name: 'eve', enabled: false, email: 'eve@example.org', description: 'Disabled account' },
] as const;

export interface LdapPeer {
  url: string;
  port: number;
  /** TLS mode only: the ldaps:// URL (StartTLS is offered on `url` too). */
  ldapsUrl?: string;
  /** TLS mode only: the throwaway CA that signed the server's certificate (127.0.0.1 / localhost). */
  caFile?: string;
  /** TLS mode only: an unrelated CA, which verifies nothing the server presents. */
  otherCaFile?: string;
  /** slapd's stats log (ACCEPT, STARTTLS, "TLS established", BIND lines). */
  logFile: string;
  /** Stops slapd (by its PID, stop.sh). */
  stop(): Promise<void>;
  /** Starts a fresh slapd on the same port and directory (the seed again). */
  start(): Promise<void>;
}

/**
 * A private slapd for one test file (start.sh installs slapd if missing), on a free port with its own
 * state directory; stopped by its PID when the test ends.
 */
export async function startLdapPeer(
  t: { teardown(fn: () => unknown): void },
  options: { users?: number; tls?: boolean; tlsSubjectAltName?: string; /** Where ports come from (a test of the retry gives a taken one first). */ ports?: () => Promise<number> } = {},
): Promise<LdapPeer> {
  const ports = options.ports ?? freePort;
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-ldap-'));
  // stop.sh finds slapd by the PID file in the state directory, whichever ports it was given.
  const stop = () => run('bash', [path.join(PEER, 'stop.sh')], { env: { ...process.env, LDAP_PEER_DIR: directory } });
  t.teardown(async () => {
    await stop();
    fs.rmSync(directory, { recursive: true, force: true });
  });
  return startOnFreePort(async (port) => {
    const peer = ldapPeerOn(directory, port, options.tls ? await ports() : undefined, options);
    try {
      await peer.start();
    } catch (error) {
      // start.sh exits with PORT_TAKEN when one of its ports was taken (slapd is not left running).
      if ((error as { code?: unknown }).code === PORT_TAKEN) throw new PortTakenError(`slapd: a port was taken (${[peer.url, peer.ldapsUrl].filter(Boolean).join(', ')})`);
      throw error;
    }
    return peer;
  }, ports);
}

/** start.sh's exit status when a port was taken. */
const PORT_TAKEN = 75;

function ldapPeerOn(directory: string, port: number, ldapsPort: number | undefined, options: { users?: number; tlsSubjectAltName?: string }): LdapPeer {
  // users: LARGE mode, user00001..userN (password bulk-secret, every 10th disabled) and group bulk.
  // tls: start.sh's TLS mode (its own CA, StartTLS on ldap://, and an ldaps:// listener); the server
  // certificate is for IP:127.0.0.1,DNS:localhost unless tlsSubjectAltName says otherwise.
  const env = {
    ...process.env,
    LDAP_PORT: String(port),
    LDAP_PEER_DIR: directory,
    LDAP_ADMIN_PASSWORD,
    LDAP_USERS: String(options.users ?? 0),
    ...(ldapsPort ? { LDAP_TLS: '1', LDAPS_PORT: String(ldapsPort) } : {}),
    ...(options.tlsSubjectAltName ? { LDAP_TLS_SAN: options.tlsSubjectAltName } : {}),
  };
  return {
    url: `ldap://127.0.0.1:${port}`,
    port,
    ...(ldapsPort
      ? {
          ldapsUrl: `ldaps://127.0.0.1:${ldapsPort}`,
          caFile: path.join(directory, 'tls', 'ca.pem'),
          otherCaFile: path.join(directory, 'tls', 'other-ca.pem'),
        }
      : {}),
    logFile: path.join(directory, 'slapd.log'),
    stop: async () => {
      await run('bash', [path.join(PEER, 'stop.sh')], { env });
    },
    start: async () => {
      await run('bash', [path.join(PEER, 'start.sh')], { env, timeout: 600_000 });
    },
  };
}

/** The configuration of an LDAP domain, as the Keystone peer's (README): strings, as the domain config API holds them. */
export function ldapDomainConfig(url: string, ldap: Record<string, unknown> = {}): DomainConfigGroups {
  return {
    identity: { driver: 'ldap' },
    ldap: {
      url,
      user: LDAP_ADMIN_DN,
      password: LDAP_ADMIN_PASSWORD,
      suffix: LDAP_SUFFIX,
      query_scope: 'one',
      page_size: '0',
      user_tree_dn: `ou=Users,${LDAP_SUFFIX}`,
      user_objectclass: 'inetOrgPerson',
      user_id_attribute: 'uid',
      user_name_attribute: 'uid',
      user_mail_attribute: 'mail',
      user_description_attribute: 'description',
      user_pass_attribute: 'userPassword',
      user_enabled_attribute: 'employeeType',
      user_enabled_default: 'True',
      user_enabled_mask: '0',
      user_enabled_invert: 'false',
      group_tree_dn: `ou=Groups,${LDAP_SUFFIX}`,
      group_objectclass: 'groupOfNames',
      group_id_attribute: 'cn',
      group_name_attribute: 'cn',
      group_member_attribute: 'member',
      group_members_are_ids: 'false',
      group_desc_attribute: 'description',
      ...ldap,
    },
  };
}
