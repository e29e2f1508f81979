import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { builtService } from './build.ts';
import { ROOT } from './processes.ts';

const run = promisify(execFile);

export interface ManageResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs `npm run manage -- <args>` as its own process (the bundled CLI: test/helpers/build.ts). The test shell's database, Redis and policy
 * settings are cleared (the embedded store, no Redis, the shipped policies) unless `environment`
 * sets them; a failing command resolves with its exit code instead of throwing.
 */
export async function manage(args: string[], environment: Record<string, string> = {}): Promise<ManageResult> {
  try {
    const { stdout, stderr } = await run(process.execPath, [...(await builtService()).manage, ...args], {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: '', TEST_DATABASE_URL: '', REDIS_URL: '', POLICY_DIR: '', ...environment },
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failure = error as ManageResult;
    return { code: failure.code, stdout: failure.stdout, stderr: failure.stderr };
  }
}
