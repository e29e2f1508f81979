/**
 * The prototypes whose methods primitives call (`s.slice()`, `n.toString()`): V8 must hold each in
 * its fast form (a map of its own, not a property dictionary) for optimised code to reach a
 * primitive's method directly.
 */
const PRIMITIVE_PROTOTYPES: readonly object[] = [String.prototype, Number.prototype, Boolean.prototype, Symbol.prototype, BigInt.prototype];

/**
 * Gives the primitives' prototypes back their fast form, after a module has made one a dictionary.
 *
 * A class extending a primitive's wrapper (`class VerbatimString extends String`, evaluated when
 * ioredis is imported) makes V8 turn that prototype into a property dictionary, and a method call on
 * a primitive never turns it back: from then on every `s.includes()`, `s.slice()` or
 * `s.charCodeAt()` in optimised code, node's own header checks among them, goes through the generic
 * load stub (bench/README.md, "String.prototype in dictionary mode"). Adding a property to an object
 * that inherits from the prototype does turn it back (V8 rebuilds the prototype chain's fast maps
 * before it stores); the object is dropped. Call once every module the process needs at start has
 * been evaluated.
 */
export function restoreFastPrimitivePrototypes(): void {
  for (const prototype of PRIMITIVE_PROTOTYPES) {
    const heir = Object.create(prototype) as { fastForm?: true };
    heir.fastForm = true;
  }
}
