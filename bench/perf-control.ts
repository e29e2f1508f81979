/**
 * perf started with its events off and turned on through its control fifo (`--control`, `-D -1`),
 * acknowledged once they are: what it counts or records starts at a known moment, not when perf
 * happens to have attached. Shared by `perf stat` (kernel-events.ts) and `perf record` (cpu-holders.ts).
 */
import { execFileSync, spawn } from 'node:child_process';
import { open } from 'node:fs/promises';
import path from 'node:path';

export interface ControlledPerf {
  /** Interrupts perf (which then writes what it counted or recorded) and waits for it to exit. */
  stop(): Promise<{ code: number | null; errors: string }>;
}

/** `perf <command> -D -1 --control fifo:… <args>`, its fifos in `directory`; resolves once perf is counting. */
export async function startControlledPerf(command: 'stat' | 'record', args: readonly string[], directory: string): Promise<ControlledPerf> {
  const [control, acknowledge] = ['control', 'ack'].map((name) => path.join(directory, name)) as [string, string];
  execFileSync('mkfifo', [control, acknowledge]);
  const child = spawn('perf', [command, '-D', '-1', '--control', `fifo:${control},${acknowledge}`, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  let errors = '';
  child.stderr.on('data', (chunk: Buffer) => (errors = (errors + chunk.toString()).slice(-2000)));
  const exited = new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => resolve(code));
  });
  // Opened read-write, neither end waits for perf to open the other (a perf that failed to start
  // would leave a plain open hanging): perf's exit ends the wait for its acknowledgement instead.
  const [controlFile, acknowledgeFile] = await Promise.all([open(control, 'r+'), open(acknowledge, 'r+')]);
  const closeFifos = () => Promise.all([controlFile.close(), acknowledgeFile.close()]);
  await controlFile.write('enable\n');
  const reply = Buffer.alloc(16);
  const acknowledged = await Promise.race([acknowledgeFile.read(reply, 0, reply.length).then(({ bytesRead }) => reply.subarray(0, bytesRead).toString()), exited.then((code) => `exit ${code}`)]);
  if (!acknowledged.startsWith('ack')) {
    child.kill('SIGKILL');
    // The read of the acknowledgement is still pending (the fifo is open read-write, so it never
    // sees end-of-file), and close() waits for it: feed it a byte first.
    await acknowledgeFile.write('x');
    await closeFifos();
    throw new Error(`perf ${command} did not start (${acknowledged}): ${errors}`);
  }
  return {
    async stop() {
      child.kill('SIGINT');
      const code = await exited;
      await closeFifos();
      return { code, errors };
    },
  };
}
