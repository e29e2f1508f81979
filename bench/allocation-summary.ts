/**
 * Prints a sampled allocation profile (bench/allocations.sh) per proxied request: the bytes each
 * function allocated itself, and the call paths (four frames) that allocated most.
 *
 *   tsx bench/allocation-summary.ts <profile.json> <requests>
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: ProfileNode[];
}

const [file, requestsText] = process.argv.slice(2);
const requests = Number(requestsText);
if (!file || !(requests > 0)) {
  console.error('usage: tsx bench/allocation-summary.ts <profile.json> <requests>');
  process.exit(2);
}
const profile = JSON.parse(readFileSync(file, 'utf8')) as { head: ProfileNode; samples: { nodeId: number; size: number }[] };
const bytesByNode = new Map<number, number>();
for (const sample of profile.samples) bytesByNode.set(sample.nodeId, (bytesByNode.get(sample.nodeId) ?? 0) + sample.size);

const byFunction = new Map<string, number>();
const byPath = new Map<string, number>();
const add = (into: Map<string, number>, key: string, bytes: number) => into.set(key, (into.get(key) ?? 0) + bytes);
const frameName = ({ functionName, url, lineNumber }: ProfileNode['callFrame']) => `${functionName || '(anonymous)'} ${url.split('/').pop()}:${lineNumber + 1}`;
// Iterative: a deep stack must not overflow ours.
const stack: { node: ProfileNode; path: string[] }[] = [{ node: profile.head, path: [] }];
while (stack.length > 0) {
  const { node, path } = stack.pop()!;
  const here = [...path, frameName(node.callFrame)];
  const bytes = bytesByNode.get(node.id) ?? 0;
  if (bytes > 0) {
    add(byFunction, here[here.length - 1]!, bytes);
    add(byPath, here.slice(-4).reverse().join(' < '), bytes);
  }
  for (const child of node.children ?? []) stack.push({ node: child, path: here });
}

const total = [...bytesByNode.values()].reduce((sum, bytes) => sum + bytes, 0);
const top = (from: Map<string, number>, count: number) =>
  [...from].sort((a, b) => b[1] - a[1]).slice(0, count).map(([name, bytes]) => `${String(Math.round(bytes / requests)).padStart(8)}  ${name}`);
console.log(`sampled bytes allocated per proxied request: ${Math.round(total / requests)} (over ${requests} requests)`);
console.log('\nby function (its own allocations):');
console.log(top(byFunction, 25).join('\n'));
console.log('\nby call path (innermost first):');
console.log(top(byPath, 20).join('\n'));
