import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { listenerPids, PortTakenError, ROOT, startOnFreePort } from './processes.ts';

const run = promisify(execFile);
/** The shared peer's scripts (../shared/peers/oidc beside the checkout, or OIDC_PEER_SCRIPTS). */
const PEER = process.env.OIDC_PEER_SCRIPTS ?? path.resolve(ROOT, '../shared/peers/oidc');

/** The peer's users (its users.json) and its confidential client. */
export const OIDC_USERS = { alice: 'alice-pass', bob: 'bob-pass' } as const;
export const OIDC_CLIENT = { id: 'keystone', secret: 'keystone-secret' } as const;

export interface OidcTokens {
  access_token: string;
  id_token?: string;
  token_type: string;
  expires_in: number;
  scope: string;
}

export interface OidcPeer {
  /** http://127.0.0.1:<port> (the peer's issuer). */
  issuer: string;
  port: number;
  directory: string;
  /** Password grant (RFC 6749 §4.3) with the keystone client. */
  tokens(user: keyof typeof OIDC_USERS, scope?: string): Promise<OidcTokens>;
  /** RFC 7009 revocation of an access token. */
  revoke(token: string): Promise<void>;
  stop(): Promise<void>;
  start(): Promise<void>;
  /** Stops the peer, deletes its signing key and starts it again: a new key with a new kid. */
  rotateKey(): Promise<void>;
}

/**
 * A private OpenID Provider (panva/oidc-provider, /work/shared/peers/oidc) for one test: a free
 * port, its own state directory, run on the shell's node (the peer's README: Node 20), stopped by
 * its PID (stop.sh) in teardown. `atFormat: 'opaque'` makes its access tokens opaque (introspection only).
 */
export async function startOidcPeer(
  t: { teardown(fn: () => unknown): void },
  options: {
    atFormat?: 'jwt' | 'opaque';
    /** The provider's clients (its OIDC_CLIENTS, RFC 7591 metadata) instead of clients.json. */ clients?: object[];
    /** Where ports come from (a test of the retry gives a taken one first). */ ports?: () => Promise<number>;
  } = {},
): Promise<OidcPeer> {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-oidc-'));
  // stop.sh finds the provider by the PID file in the state directory, whichever port it was given.
  const stop = () => run('bash', [path.join(PEER, 'stop.sh')], { env: { ...process.env, OIDC_STATE_DIR: directory } });
  t.teardown(async () => {
    await stop();
    fs.rmSync(directory, { recursive: true, force: true });
  });
  // (Every try in the same directory: the provider's npm install is kept.)
  return startOnFreePort(async (port) => {
    const peer = oidcPeerOn(directory, port, options);
    try {
      await peer.start();
    } catch (error) {
      if (/is taken by something else|EADDRINUSE/.test(String((error as { stderr?: unknown }).stderr))) throw new PortTakenError(`the OpenID Provider: port ${port} was taken`);
      throw error;
    }
    // Whatever took the port first may answer there too: the listener has to be this provider.
    if (listenerPids(port).includes(Number(fs.readFileSync(path.join(directory, 'oidc.pid'), 'utf8')))) return peer;
    await stop();
    throw new PortTakenError(`port ${port}: another process answers there`);
  }, options.ports);
}

function oidcPeerOn(directory: string, port: number, options: { atFormat?: 'jwt' | 'opaque'; clients?: object[] }): OidcPeer {
  const issuer = `http://127.0.0.1:${port}`;
  // The peer runs on the shell's node, not this project's (node_modules/.bin first on npm's PATH).
  const PATH = (process.env.PATH ?? '').split(':').filter((entry) => !entry.includes('node_modules')).join(':');
  const env = { ...process.env, PATH, OIDC_PORT: String(port), OIDC_STATE_DIR: directory, OIDC_AT_FORMAT: options.atFormat ?? 'jwt', ...(options.clients ? { OIDC_CLIENTS: JSON.stringify(options.clients) } : {}) };
  const basic = `Basic ${Buffer.from(`${OIDC_CLIENT.id}:${OIDC_CLIENT.secret}`).toString('base64')}`;
  const peer: OidcPeer = {
    issuer,
    port,
    directory,
    tokens: async (user, scope = 'openid profile email groups') => {
      const response = await fetch(`${issuer}/token`, {
        method: 'POST',
        headers: { authorization: basic, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ grant_type: 'password', username: user, password: OIDC_USERS[user], scope }).toString(),
      });
      const body = (await response.json()) as OidcTokens;
      if (response.status !== 200) throw new Error(`password grant for ${user}: ${response.status} ${JSON.stringify(body)}`);
      return body;
    },
    revoke: async (token) => {
      const response = await fetch(`${issuer}/token/revocation`, {
        method: 'POST',
        headers: { authorization: basic, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ token, token_type_hint: 'access_token' }).toString(),
      });
      if (response.status !== 200) throw new Error(`revocation: ${response.status} ${await response.text()}`);
    },
    stop: async () => {
      await run('bash', [path.join(PEER, 'stop.sh')], { env });
    },
    start: async () => {
      await run('bash', [path.join(PEER, 'start.sh')], { env, timeout: 300_000 });
    },
    rotateKey: async () => {
      await peer.stop();
      fs.rmSync(path.join(directory, 'jwks.json'));
      await peer.start();
    },
  };
  return peer;
}
