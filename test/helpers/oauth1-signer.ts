import { execFileSync } from 'node:child_process';
import { debianPython } from './debian-packages.ts';

/** Debian's python3 with python3-oauthlib (and keystoneclient, for its OAuth1 flow): signers independent of ours. */
export const PYTHON = debianPython(['python3-oauthlib', 'python3-keystoneclient']);

const SIGN = `
import json, sys
from oauthlib import oauth1
a = json.load(sys.stdin)
client = oauth1.Client(a['consumer_key'], client_secret=a['consumer_secret'],
    resource_owner_key=a.get('token'), resource_owner_secret=a.get('token_secret'),
    verifier=a.get('verifier'), callback_uri=a.get('callback'),
    signature_method=a.get('method', oauth1.SIGNATURE_HMAC_SHA1),
    timestamp=a.get('timestamp'), nonce=a.get('nonce'))
uri, headers, body = client.sign(a['url'], http_method=a.get('http_method', 'POST'))
print(headers['Authorization'])
`;

export interface OAuthSigning {
  url: string;
  consumerKey: string;
  consumerSecret: string;
  token?: string;
  tokenSecret?: string;
  verifier?: string;
  callback?: string;
  /** Seconds, as a string of 10 digits (oauthlib takes it as given). */
  timestamp?: string;
  nonce?: string;
  method?: 'HMAC-SHA1' | 'HMAC-SHA256' | 'PLAINTEXT';
  httpMethod?: string;
}

/** Whether python3 can import oauthlib here (the tests that need it fail, not skip, when it cannot). */
export function oauthlibAvailable(): boolean {
  try {
    execFileSync(PYTHON, ['-c', 'import oauthlib'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** The Authorization header oauthlib writes for this request. */
export function oauthlibAuthorization(signing: OAuthSigning): string {
  const input = {
    url: signing.url,
    consumer_key: signing.consumerKey,
    consumer_secret: signing.consumerSecret,
    token: signing.token,
    token_secret: signing.tokenSecret,
    verifier: signing.verifier,
    callback: signing.callback,
    timestamp: signing.timestamp,
    nonce: signing.nonce,
    method: signing.method,
    http_method: signing.httpMethod,
  };
  return execFileSync(PYTHON, ['-c', SIGN], { input: JSON.stringify(input), encoding: 'utf8' }).trim();
}
