// Parsing XML that anyone may send: no DTD (so no entity declarations, external or internal, and
// no entity expansion), no processing instruction but the XML declaration, and any parser error or
// warning is a refusal (xmldom otherwise recovers from malformed input silently).

import { domParserClass } from '../xml-libraries.ts';

/** Why a document is refused before anything in it is looked at. */
export class UnsafeXmlError extends Error {
  override name = 'UnsafeXmlError';
}

/**
 * Deeper documents are refused (a SAML Response in an ECP envelope nests about 10 levels): the
 * XPath and canonicalization code of xml-crypto recurse on the tree.
 */
export const MAX_XML_DEPTH = 48;

/** Larger documents are refused unparsed (the route's body limit is the first bound). */
export const MAX_XML_LENGTH = 256 * 1024;

const DTD = /<!DOCTYPE|<!ENTITY|<!ELEMENT|<!ATTLIST|<!NOTATION/i;
/** A processing instruction other than the XML declaration at the very start. */
const PROCESSING_INSTRUCTION = /<\?(?!xml[\s?])/i;

const ELEMENT_NODE = 1;
const ENTITY_REFERENCE_NODE = 5;
const PROCESSING_INSTRUCTION_NODE = 7;
const DOCUMENT_TYPE_NODE = 10;

/** Parses `xml` strictly; throws UnsafeXmlError for a DTD, a PI, an error or an empty document. */
export function parseUntrustedXml(xml: string): Document {
  if (xml.length > MAX_XML_LENGTH) throw new UnsafeXmlError(`the document is longer than ${MAX_XML_LENGTH} characters`);
  if (DTD.test(xml)) throw new UnsafeXmlError('the document has a DTD (DOCTYPE or entity declarations are refused)');
  const body = xml.replace(/^\uFEFF/, '').replace(/^<\?xml[^>]*\?>/, '');
  if (PROCESSING_INSTRUCTION.test(body)) throw new UnsafeXmlError('the document has a processing instruction');
  const problems: string[] = [];
  const report = (message: string) => problems.push(String(message));
  const DOMParser = domParserClass();
  const document = new DOMParser({ errorHandler: { warning: report, error: report, fatalError: report } }).parseFromString(xml, 'text/xml');
  if (problems.length > 0) throw new UnsafeXmlError(`the document is not well-formed XML: ${problems[0]?.split('\n')[0]}`);
  const root = document?.documentElement;
  if (!root) throw new UnsafeXmlError('the document has no root element');
  for (let node = document.firstChild; node; node = node.nextSibling) {
    if (node.nodeType === DOCUMENT_TYPE_NODE || node.nodeType === PROCESSING_INSTRUCTION_NODE) throw new UnsafeXmlError('the document has a DTD or a processing instruction');
  }
  const pending: Array<[Node, number]> = [[root as unknown as Node, 1]];
  while (pending.length > 0) {
    const [node, depth] = pending.pop() as [Node, number];
    if (depth > MAX_XML_DEPTH) throw new UnsafeXmlError(`the document nests deeper than ${MAX_XML_DEPTH} levels`);
    if (node.nodeType === ENTITY_REFERENCE_NODE || node.nodeType === PROCESSING_INSTRUCTION_NODE || node.nodeType === DOCUMENT_TYPE_NODE) {
      throw new UnsafeXmlError('the document has an entity reference or a processing instruction');
    }
    for (let child = node.firstChild; child; child = child.nextSibling) pending.push([child, depth + 1]);
  }
  return document as unknown as Document;
}

/** The element children of `parent`, in order. */
export function childElements(parent: Element | Document): Element[] {
  const children: Element[] = [];
  for (let child = parent.firstChild; child; child = child.nextSibling) if (child.nodeType === ELEMENT_NODE) children.push(child as Element);
  return children;
}

/** The element children of `parent` with this namespace and local name. */
export function children(parent: Element, namespace: string, localName: string): Element[] {
  return childElements(parent).filter((child) => child.namespaceURI === namespace && child.localName === localName);
}

/** The one child with this name, or undefined when there is none; several: an error. */
export function onlyChild(parent: Element, namespace: string, localName: string): Element | undefined {
  const found = children(parent, namespace, localName);
  if (found.length > 1) throw new UnsafeXmlError(`${parent.localName} has several ${localName} elements`);
  return found[0];
}

/** Every descendant element (the element itself excluded) with this namespace and local name. */
export function descendants(parent: Element | Document, namespace: string, localName: string): Element[] {
  return Array.from((parent as Element).getElementsByTagNameNS(namespace, localName) as unknown as ArrayLike<Element>);
}

/** An element's text, trimmed. */
export function textOf(element: Element | undefined): string {
  return (element?.textContent ?? '').trim();
}
