// manage saml_setup and saml_idp_metadata: the SAML identity provider's signing key pair and the
// metadata a Keystone service provider imports (keystone-manage saml_idp_metadata).

import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Config } from '../config.ts';
import { idpMetadata, MetadataSettingsError } from '../federation/saml/metadata.ts';
import { loadSigningKeys } from '../federation/saml/signing-keys.ts';

const run = promisify(execFile);

export class SamlCommandError extends Error {
  override name = 'SamlCommandError';
}

/**
 * Creates SAML_KEYFILE (RSA 2048, mode 0600) and SAML_CERTFILE (self-signed, SHA-256) with Debian's
 * openssl, unless both exist; returns what was done. The certificate's subject is the entity id's host.
 */
export async function samlSetup(config: Config, options: { days: number; openssl?: string }): Promise<string> {
  const { certFile, keyFile, entityId } = config.saml;
  if (!certFile || !keyFile) throw new SamlCommandError('SAML_CERTFILE and SAML_KEYFILE must name the files to create');
  const present = [certFile, keyFile].filter((file) => fs.existsSync(file));
  if (present.length === 2) {
    loadSigningKeys(certFile, keyFile);
    return `${certFile} and ${keyFile} already exist; nothing to do`;
  }
  if (present.length === 1) throw new SamlCommandError(`${present[0]} exists but its pair does not; move it away or create the other file`);
  for (const file of [certFile, keyFile]) fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const host = entityId ? new URL(entityId).hostname : '';
  const subject = `/CN=${(host || 'keystone-gateway-saml-idp').replace(/[/\\=,+]/g, '_')}`;
  const scratch = fs.mkdtempSync(path.join(path.dirname(keyFile), '.saml-setup-'));
  try {
    const key = path.join(scratch, 'key.pem');
    const cert = path.join(scratch, 'cert.pem');
    await run(options.openssl ?? 'openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-sha256', '-nodes', '-keyout', key, '-out', cert, '-days', String(options.days), '-subj', subject]);
    fs.chmodSync(key, 0o600);
    loadSigningKeys(cert, key);
    fs.renameSync(key, keyFile);
    fs.copyFileSync(cert, certFile);
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
  return `created ${keyFile} and ${certFile} (${subject}, ${options.days} days)`;
}

/** keystone-manage saml_idp_metadata: the EntityDescriptor from the settings and SAML_CERTFILE. */
export function samlIdpMetadata(config: Config): string {
  const { certFile } = config.saml;
  try {
    if (!certFile) throw new SamlCommandError('SAML_CERTFILE is not set');
    const certificate = loadSigningKeys(certFile, config.saml.keyFile ?? certFile).certificateBase64;
    return idpMetadata(config.saml, certificate);
  } catch (error) {
    if (error instanceof MetadataSettingsError) throw new SamlCommandError(error.message);
    throw error;
  }
}
