import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '../..');
export const shippedPolicyDirectory = path.join(root, 'policies');
export const shippedModel = fs.readFileSync(path.join(shippedPolicyDirectory, 'model.conf'), 'utf8');

interface Teardown {
  teardown(fn: () => void): void;
}

/**
 * A policy directory in the system temp directory holding the shipped model.conf (unless `files`
 * replaces it) and `files` (relative path -> content); removed when the test ends.
 */
export function policyDirectory(t: Teardown, files: Record<string, string>): string {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-policy-'));
  t.teardown(() => fs.rmSync(directory, { recursive: true, force: true }));
  writePolicyFiles(directory, { 'model.conf': shippedModel, ...files });
  return directory;
}

export function writePolicyFiles(directory: string, files: Record<string, string>): void {
  for (const [name, content] of Object.entries(files)) {
    const file = path.join(directory, name);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, content);
  }
}

/** Rule lines as a file: the header comment puts the first rule on line 2. */
export function ruleFile(...lines: string[]): string {
  return ['# test rules', ...lines, ''].join('\n');
}
