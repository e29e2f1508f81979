import { registerHooks } from 'node:module';

/**
 * Records every module this process resolves from now on (CommonJS and ESM alike), for tests of
 * what a process loads: import the modules under test dynamically after calling this. Returns the
 * code modules resolved so far whose URL matches `pattern` (package.json files are left out:
 * MikroORM resolves its packages' to compare their versions).
 */
export function recordResolvedModules(): (pattern: RegExp) => string[] {
  const resolved: string[] = [];
  registerHooks({
    resolve(specifier, context, nextResolve) {
      const result = nextResolve(specifier, context);
      resolved.push(result.url);
      return result;
    },
  });
  return (pattern) => resolved.filter((url) => pattern.test(url) && !url.endsWith('/package.json'));
}
