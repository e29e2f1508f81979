import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DOMParser } from '@xmldom/xmldom';
import { ensureDebianPackages } from '../../helpers/debian-packages.ts';
import { ROOT } from '../../helpers/processes.ts';

/** Real K2K samples (../shared/peers/k2k beside the checkout). */
export const K2K_SAMPLES = path.resolve(ROOT, '../shared/peers/k2k');

/** A fresh RSA key and self-signed certificate (openssl), in a directory removed at teardown. */
export function makeKeyPair(t: { teardown(fn: () => unknown): void }, bits = 2048): { dir: string; certFile: string; keyFile: string } {
  ensureDebianPackages(['openssl']);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-saml-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const certFile = path.join(dir, 'cert.pem');
  const keyFile = path.join(dir, 'key.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', `rsa:${bits}`, '-nodes', '-keyout', keyFile, '-out', certFile, '-days', '30', '-subj', '/CN=saml-test'], { stdio: 'ignore' });
  return { dir, certFile, keyFile };
}

/** Debian's xmlsec1 verifying the Assertion's signature with `certFile`: true when it accepts. */
export function xmlsecVerifies(xml: string, certFile: string): boolean {
  ensureDebianPackages(['xmlsec1']);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-xmlsec-'));
  try {
    const file = path.join(dir, 'doc.xml');
    fs.writeFileSync(file, xml);
    const result = spawnSync('xmlsec1', ['--verify', '--pubkey-cert-pem', certFile, '--id-attr:ID', 'urn:oasis:names:tc:SAML:2.0:assertion:Assertion', file], { encoding: 'utf8' });
    return result.status === 0;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export function parseXml(xml: string): Document {
  const errors: string[] = [];
  const document = new DOMParser({ errorHandler: { warning: () => {}, error: (message) => errors.push(message), fatalError: (message) => errors.push(message) } }).parseFromString(xml, 'text/xml');
  if (errors.length) throw new Error(`XML does not parse: ${errors.join('; ')}`);
  return document as unknown as Document;
}

/**
 * The document's shape: one line per element, `depth {namespace}localName [attribute names]`, with
 * the text of leaves whose text is not variable (ids, times, digests and certificates are).
 */
export function skeleton(xml: string): string[] {
  const lines: string[] = [];
  const walk = (node: Element, depth: number) => {
    const attributes: string[] = [];
    for (let i = 0; i < node.attributes.length; i++) {
      const attribute = node.attributes.item(i)!;
      if (attribute.name === 'xmlns' || attribute.name.startsWith('xmlns:')) continue;
      attributes.push(`${attribute.namespaceURI ? `{${attribute.namespaceURI}}` : ''}${attribute.localName}`);
    }
    lines.push(`${depth} {${node.namespaceURI}}${node.localName} [${attributes.sort().join(' ')}]`);
    for (let child = node.firstChild; child; child = child.nextSibling) if (child.nodeType === 1) walk(child as Element, depth + 1);
  };
  walk(parseXml(xml).documentElement, 0);
  return lines;
}

/** Elements by namespace and local name. */
export function elements(document: Document | Element, namespace: string, localName: string): Element[] {
  return Array.from(document.getElementsByTagNameNS(namespace, localName) as unknown as ArrayLike<Element>);
}

/** Each openstack_* attribute's values, in order. */
export function samlAttributes(xml: string): Record<string, string[]> {
  const ns = 'urn:oasis:names:tc:SAML:2.0:assertion';
  const out: Record<string, string[]> = {};
  for (const attribute of elements(parseXml(xml), ns, 'Attribute')) {
    out[attribute.getAttribute('Name')!] = elements(attribute, ns, 'AttributeValue').map((value) => value.textContent ?? '');
  }
  return out;
}
