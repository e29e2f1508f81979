import { spawn } from 'node:child_process';
import readline from 'node:readline';

/**
 * One Python process for a whole test file, asked over a line protocol: one JSON object a line on its
 * stdin, one answer a line on its stdout (`{"result": …}` or `{"error": "…"}`), in order. Python and
 * its libraries (botocore, oauthlib, cryptography) take a good part of a second to start; a process
 * per signature made the tests that check against them slow. Stopped (stdin closed, then killed by
 * its PID if it lingers) at `t`'s teardown.
 */
export interface PythonWorker {
  ask<T = unknown>(request: unknown): Promise<T>;
}

export function startPythonWorker(t: { teardown(fn: () => unknown): void }, python: string, args: string[]): PythonWorker {
  const child = spawn(python, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const waiting: Array<{ resolve(value: unknown): void; reject(error: Error): void }> = [];
  let ended: Error | undefined;
  const fail = (error: Error) => {
    ended ??= error;
    for (const pending of waiting.splice(0)) pending.reject(ended);
  };
  child.on('error', fail);
  child.on('exit', (code, signal) => fail(new Error(`${python} ${args.join(' ')} exited (${code ?? signal}): ${stderr}`)));
  readline.createInterface({ input: child.stdout }).on('line', (line) => {
    const pending = waiting.shift();
    if (!pending) return;
    let answer: { result?: unknown; error?: string };
    try {
      answer = JSON.parse(line) as typeof answer;
    } catch {
      pending.reject(new Error(`not JSON from ${python}: ${line} ${stderr}`));
      return;
    }
    if (answer.error !== undefined) pending.reject(new Error(`${python} ${args.join(' ')}: ${answer.error}`));
    else pending.resolve(answer.result);
  });
  t.teardown(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.stdin.end();
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  });
  return {
    ask<T>(request: unknown): Promise<T> {
      if (ended) return Promise.reject(ended);
      return new Promise<T>((resolve, reject) => {
        waiting.push({ resolve: resolve as (value: unknown) => void, reject });
        child.stdin.write(`${JSON.stringify(request)}\n`);
      });
    },
  };
}
