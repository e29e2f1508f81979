// Escaping for the XML this module writes by hand: every value put in an element or an attribute
// goes through one of these. Characters XML 1.0 cannot carry at all are refused, not dropped.

// eslint-disable-next-line no-control-regex
const FORBIDDEN = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** A value XML 1.0 cannot represent (control characters, lone surrogates). */
export class XmlValueError extends Error {
  override name = 'XmlValueError';
}

function checked(value: string): string {
  if (FORBIDDEN.test(value)) throw new XmlValueError('a value contains a character XML 1.0 cannot carry');
  return value;
}

/** Element text: &, < and > escaped (\r too, so it survives parsing). */
export function text(value: string): string {
  return checked(value).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/\r/g, '&#13;');
}

/** A double-quoted attribute value: also ", and the whitespace a parser would normalise. */
export function attribute(value: string): string {
  return text(value).replace(/"/g, '&quot;').replace(/\t/g, '&#9;').replace(/\n/g, '&#10;');
}
