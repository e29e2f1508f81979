import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { NS } from '../../../src/federation/saml/namespaces.ts';
import { manage } from '../../helpers/manage.ts';
import { elements, parseXml, skeleton, K2K_SAMPLES } from './saml-test-helpers.ts';

const ENTITY_ID = 'https://idp.example:5000/v3/OS-FEDERATION/saml2/idp';
const SSO = 'https://idp.example:5000/v3/OS-FEDERATION/saml2/sso';

t.test('saml_setup creates the key pair once; saml_idp_metadata prints the EntityDescriptor', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-saml-manage-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const env = {
    DATA_DIR: dir,
    SAML_CERTFILE: path.join(dir, 'saml', 'cert.pem'),
    SAML_KEYFILE: path.join(dir, 'saml', 'key.pem'),
    SAML_IDP_ENTITY_ID: ENTITY_ID,
    SAML_IDP_SSO_ENDPOINT: SSO,
  };
  const setup = await manage(['saml_setup', '--days', '30'], env);
  t.equal(setup.code, 0, setup.stderr);
  t.match(setup.stdout, /^created .*key\.pem and .*cert\.pem \(\/CN=idp\.example, 30 days\)/);
  t.equal(fs.statSync(env.SAML_KEYFILE).mode & 0o777, 0o600, 'the private key is readable by its owner only');
  const certificate = new crypto.X509Certificate(fs.readFileSync(env.SAML_CERTFILE));
  t.ok(certificate.checkPrivateKey(crypto.createPrivateKey(fs.readFileSync(env.SAML_KEYFILE))), 'the certificate is the key\'s');
  t.equal(certificate.subject, 'CN=idp.example');
  t.equal(fs.readdirSync(path.dirname(env.SAML_KEYFILE)).sort().join(','), 'cert.pem,key.pem', 'no scratch files left');
  const again = await manage(['saml_setup'], env);
  t.equal(again.code, 0);
  t.match(again.stdout, /already exist; nothing to do/);
  t.equal(new crypto.X509Certificate(fs.readFileSync(env.SAML_CERTFILE)).fingerprint256, certificate.fingerprint256, 'not replaced');

  const metadata = await manage(['saml_idp_metadata'], env);
  t.equal(metadata.code, 0, metadata.stderr);
  const document = parseXml(metadata.stdout);
  t.equal(document.documentElement.getAttribute('entityID'), ENTITY_ID);
  t.equal(elements(document, NS.xmldsig, 'X509Certificate')[0]!.textContent, certificate.raw.toString('base64'));
  t.same(skeleton(metadata.stdout), skeleton(fs.readFileSync(path.join(K2K_SAMPLES, 'k2k-idp-metadata.xml'), 'utf8')), "Keystone's structure");
  t.match(metadata.stdout, /<ns0:OrganizationName xml:lang="en">SAML Identity Provider<\/ns0:OrganizationName>/, "Keystone's defaults");
  t.match(metadata.stdout, /<ns0:ContactPerson contactType="other">/);
});

t.test('refusals: no key files named, one of the pair present, bad --days', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-saml-manage-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const none = await manage(['saml_setup'], { DATA_DIR: dir });
  t.equal(none.code, 1);
  t.match(none.stderr, /SAML_CERTFILE and SAML_KEYFILE must name the files to create/);
  const cert = path.join(dir, 'cert.pem');
  fs.writeFileSync(cert, 'x');
  const half = await manage(['saml_setup'], { DATA_DIR: dir, SAML_CERTFILE: cert, SAML_KEYFILE: path.join(dir, 'key.pem'), SAML_IDP_ENTITY_ID: ENTITY_ID, SAML_IDP_SSO_ENDPOINT: SSO });
  t.equal(half.code, 1);
  t.match(half.stderr, /cert\.pem exists but its pair does not/);
  t.equal(fs.readFileSync(cert, 'utf8'), 'x', 'left alone');
  const days = await manage(['saml_setup', '--days', 'many'], { DATA_DIR: dir });
  t.equal(days.code, 2);
  const metadata = await manage(['saml_idp_metadata'], { DATA_DIR: dir });
  t.equal(metadata.code, 1);
  t.match(metadata.stderr, /SAML_CERTFILE is not set/);
});
