// The identity provider's signing key pair (SAML_KEYFILE, SAML_CERTFILE), read and checked once at
// start: an unreadable file, a key that is not RSA, or a certificate of another key stops the start.

import crypto from 'node:crypto';
import fs from 'node:fs';
import { ConfigError } from '../../config.ts';

export interface SamlSigningKeys {
  /** PEM text of the private key (what the signer is given). */
  privateKeyPem: string;
  certificate: crypto.X509Certificate;
  /** The certificate's DER, base64 on one line: the X509Certificate of metadata and KeyInfo. */
  certificateBase64: string;
}

function read(file: string, variable: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (error) {
    throw new ConfigError(`${variable}: cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
  }
}

export function loadSigningKeys(certFile: string, keyFile: string): SamlSigningKeys {
  const privateKeyPem = read(keyFile, 'SAML_KEYFILE');
  const certificatePem = read(certFile, 'SAML_CERTFILE');
  let key: crypto.KeyObject;
  try {
    key = crypto.createPrivateKey(privateKeyPem);
  } catch {
    throw new ConfigError(`SAML_KEYFILE: ${keyFile} is not an unencrypted PEM private key`);
  }
  if (key.asymmetricKeyType !== 'rsa') throw new ConfigError(`SAML_KEYFILE: ${keyFile} must be an RSA key (rsa-sha256 and rsa-sha1 signatures), got ${key.asymmetricKeyType}`);
  let certificate: crypto.X509Certificate;
  try {
    certificate = new crypto.X509Certificate(certificatePem);
  } catch {
    throw new ConfigError(`SAML_CERTFILE: ${certFile} is not a PEM certificate`);
  }
  if (!certificate.checkPrivateKey(key)) throw new ConfigError(`SAML_CERTFILE: ${certFile} is not the certificate of the key in SAML_KEYFILE`);
  return { privateKeyPem, certificate, certificateBase64: certificate.raw.toString('base64') };
}
