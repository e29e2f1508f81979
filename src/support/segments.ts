/**
 * Strings cut out of a request on every proxied request, and what V8 charges for them (measured
 * with callgrind, bench/README.md, 2026-12-01 third sitting): a string made for this request (a
 * substring, a lower-cased name, a key built by concatenation) is internalized when it is looked up
 * in a Map or a Set, or split by String.prototype.split: a call into the runtime that hashes it,
 * probes V8's string table and rewrites the string, ~600–700 instructions each. The helpers here
 * do the same work in JavaScript, which needs none of that.
 */

/** `path.split('/')` from `from` on: the segments between slashes, '' for an empty one. */
export function splitSegments(path: string, from = 0): string[] {
  const segments: string[] = [];
  let start = from;
  for (;;) {
    const slash = path.indexOf('/', start);
    if (slash === -1) {
      segments.push(path.slice(start));
      return segments;
    }
    segments.push(path.slice(start, slash));
    start = slash + 1;
  }
}
