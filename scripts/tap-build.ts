/**
 * npm's `pretest`: tap built with the plugins package.json asks for, before the suite starts.
 *
 * An install gives tap its default plugins, @tapjs/typescript among them, whose loader (ts-node,
 * type-checking) goes into every test process. package.json leaves that plugin out (tsx runs the
 * TypeScript), and tap rebuilds itself when its plugins differ from the configured ones, but only for
 * the run after: the run that notices still spawns every test file with the installed loaders, so
 * the first `npm test` after `npm install` (every CI run installs afresh) paid for ts-node in every
 * file. Measured here, eight identity API test files: 100 s against 60 s (183 s of CPU against 113);
 * one of them alone, 31 s against 9 (tap's own `time=` does not show it: the loading comes before).
 *
 * `tap build` is what tap runs itself. It is run when the stamp this script leaves in
 * node_modules/ (which an install replaces) does not name the configured plugins and tap's version.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const stamp = path.join(root, 'node_modules', '.tap-built-for');
const read = (file: string) => JSON.parse(readFileSync(path.join(root, file), 'utf8'));

const wanted = JSON.stringify({ tap: read('node_modules/tap/package.json').version, plugin: read('package.json').tap?.plugin ?? [] });
let built = '';
try {
  built = readFileSync(stamp, 'utf8');
} catch {
  // No stamp: not built by this script since the install.
}
if (built !== wanted) {
  execFileSync(path.join(root, 'node_modules', '.bin', 'tap'), ['build'], { cwd: root, stdio: 'inherit' });
  writeFileSync(stamp, wanted);
}
