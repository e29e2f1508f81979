import { cp, mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ValidationError } from '../support/errors.ts';
import type { DecisionRecord, GatewayReplay, PolicySubject } from './gateway-explain.ts';
import { GatewayPolicy } from './gateway-policy.ts';
import { PolicyLoadError } from './policy-files.ts';

/** A recorded decision with what replaying it needs: who asked (the policy subject) and the path policy saw. */
export interface ReplayableDecision {
  /** Its `time` is empty: `at` holds it (ms since the epoch). */
  decision: DecisionRecord;
  at: number;
  /** null: no policy decided the request (it ended before, or access rules refused it). */
  subject: PolicySubject | null;
  policyPath: string | null;
}

const ACCESS_RULES = 'application credential access rules';
const RULE_FILE = /^[A-Za-z0-9][A-Za-z0-9_.-]*\.csv$/;
/** A fixture file of the candidate, in place of (or beside) the live one of the same name. */
const FIXTURE_FILE = /^tests\/[A-Za-z0-9][A-Za-z0-9_.-]*\.ya?ml$/;

/**
 * The live policy's directory with `files` put in place of (or beside) its rule files and its
 * fixtures (`tests/<name>.yaml`), loaded and gated by the fixtures, as a reload would be: a change
 * that means to flip a live fixture case brings that fixture file along. A candidate that fails to
 * load or fails a fixture is a ValidationError naming the file and line (or the failing cases).
 */
export async function loadCandidate(liveDirectory: string, files: Readonly<Record<string, string>>): Promise<GatewayPolicy> {
  for (const name of Object.keys(files)) {
    if (!RULE_FILE.test(name) && !FIXTURE_FILE.test(name)) {
      throw new ValidationError(`Invalid candidate file name '${name}': expected <service_type>.csv or tests/<name>.yaml.`);
    }
  }
  const directory = await mkdtemp(path.join(os.tmpdir(), 'kg-replay-'));
  try {
    for (const entry of await readdir(liveDirectory)) {
      if (entry === 'model.conf' || entry === 'tests' || (entry.endsWith('.csv') && !entry.startsWith('.'))) {
        await cp(path.join(liveDirectory, entry), path.join(directory, entry), { recursive: true, dereference: true });
      }
    }
    await mkdir(path.join(directory, 'tests'), { recursive: true });
    for (const [name, text] of Object.entries(files)) await writeFile(path.join(directory, name), text);
    const relative = (message: string) => message.split(`${directory}${path.sep}`).join('');
    let candidate: GatewayPolicy;
    try {
      candidate = await GatewayPolicy.load(directory, { decisionCacheSize: 0 });
    } catch (error) {
      if (error instanceof PolicyLoadError) throw new ValidationError(`Candidate policy does not load: ${relative(error.message)}`);
      throw error;
    }
    const { passed, failures } = await candidate.runFixtures(path.join(directory, 'tests'));
    if (failures.length > 0) {
      throw new ValidationError(`Candidate policy fails ${failures.length} fixture(s) (${passed} passed): ${failures.map(relative).join('; ')}`);
    }
    return candidate;
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
}

/**
 * Decides each recorded decision again with `candidate`: the count of those a policy had decided,
 * and those whose effect would change, newest first.
 */
export function replayDecisions(candidate: Pick<GatewayPolicy, 'decide'>, recorded: readonly ReplayableDecision[]): GatewayReplay {
  let decisions = 0;
  const changed: GatewayReplay['changed'] = [];
  for (const { decision, subject, policyPath } of recorded) {
    // Access rules refused before policy ran: no candidate policy changes that.
    if (subject === null || policyPath === null || decision.effect === null || decision.service === null || decision.reason === ACCESS_RULES) continue;
    decisions++;
    const again = candidate.decide({ service: decision.service, method: decision.method, path: policyPath, ...subject });
    const effect = again.allowed ? 'allow' : 'deny';
    if (effect === decision.effect) continue;
    changed.push({
      request_id: decision.request_id,
      service: decision.service,
      method: decision.method,
      path: decision.path,
      live: decision.effect,
      candidate: effect,
      rule: again.rule ? { file: again.source ?? null, line: again.line ?? null, text: again.rule } : null,
    });
  }
  return { decisions, changed };
}
