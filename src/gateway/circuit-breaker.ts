import type { Clock } from '../support/clock.ts';

export type CircuitState = 'closed' | 'open' | 'half_open';

export interface CircuitOptions {
  /** Consecutive connection failures or timeouts that open an upstream's circuit; 0 turns circuits off. */
  failureThreshold: number;
  /** How long an open circuit refuses requests before one trial request may go through. */
  openMs: number;
}

interface CircuitLog {
  info(object: object, message: string): void;
  warn(object: object, message: string): void;
}

interface Circuit {
  state: CircuitState;
  /** Consecutive failures while closed. */
  failures: number;
  /** When the circuit last opened (clock ms). */
  openedAt: number;
  /** In half-open: the one trial request is under way. */
  trialInFlight: boolean;
}

/** What admit() answers: go ahead (possibly as the half-open trial), or refuse for this long. */
export type Admission = { admitted: true; trial: boolean } | { admitted: false; retryAfterSeconds: number };

const ADMITTED: Admission = Object.freeze({ admitted: true, trial: false });
const TRIAL: Admission = Object.freeze({ admitted: true, trial: true });

/**
 * One circuit per upstream origin. Closed: requests go through and consecutive connection failures
 * and timeouts are counted (any answer from the upstream, 5xx included, resets the count: the
 * service is reachable). At the threshold the circuit opens: requests are refused at once, without
 * a connection attempt, for `openMs`. Then half-open: exactly one trial request goes through;
 * its success closes the circuit, its failure opens it again for another `openMs`.
 */
export class UpstreamCircuits {
  private readonly circuits = new Map<string, Circuit>();

  constructor(
    private readonly options: CircuitOptions,
    private readonly clock: Clock,
    private readonly log: CircuitLog,
  ) {}

  /** Called before connecting to `origin`; an answer with admitted: false means "do not try". */
  admit(origin: string): Admission {
    const circuit = this.circuits.get(origin);
    if (circuit === undefined || circuit.state === 'closed') return ADMITTED;
    if (circuit.state === 'open') {
      const remaining = circuit.openedAt + this.options.openMs - this.clock.now();
      if (remaining > 0) return { admitted: false, retryAfterSeconds: Math.max(1, Math.ceil(remaining / 1000)) };
      circuit.state = 'half_open';
      circuit.trialInFlight = false;
      this.log.info({ upstream: origin }, 'upstream circuit half-open: one trial request goes through');
    }
    if (circuit.trialInFlight) return { admitted: false, retryAfterSeconds: 1 };
    circuit.trialInFlight = true;
    return TRIAL;
  }

  /** The upstream answered (whatever the status) a request admit() let through. */
  succeeded(origin: string, admission: Admission): void {
    const circuit = this.circuits.get(origin);
    if (circuit === undefined) return;
    if (circuit.state === 'closed') {
      circuit.failures = 0;
      return;
    }
    if (circuit.state === 'half_open' && admission.admitted && admission.trial) {
      circuit.state = 'closed';
      circuit.failures = 0;
      circuit.trialInFlight = false;
      this.log.info({ upstream: origin }, 'upstream circuit closed: the trial request succeeded');
    }
  }

  /** Connecting failed, or the upstream did not answer in time, for a request admit() let through. */
  failed(origin: string, admission: Admission, reason: string): void {
    if (this.options.failureThreshold === 0) return;
    let circuit = this.circuits.get(origin);
    if (circuit === undefined) {
      circuit = { state: 'closed', failures: 0, openedAt: 0, trialInFlight: false };
      this.circuits.set(origin, circuit);
    }
    if (circuit.state === 'closed') {
      circuit.failures++;
      if (circuit.failures >= this.options.failureThreshold) this.open(origin, circuit, `${circuit.failures} consecutive failures, the last: ${reason}`);
    } else if (circuit.state === 'half_open' && admission.admitted && admission.trial) {
      this.open(origin, circuit, `the trial request failed: ${reason}`);
    }
    // Otherwise a request let through before the circuit opened: the state it finds stands.
  }

  /** An admitted request ended without telling anything about the upstream (the client went away). */
  released(origin: string, admission: Admission): void {
    if (!admission.admitted || !admission.trial) return;
    const circuit = this.circuits.get(origin);
    if (circuit?.state === 'half_open') circuit.trialInFlight = false;
  }

  /** The state of `origin` now (closed for one never seen failing). */
  state(origin: string): CircuitState {
    return this.circuits.get(origin)?.state ?? 'closed';
  }

  /** Every origin that has had a failure, with its state (for metrics). */
  *states(): Iterable<[origin: string, state: CircuitState]> {
    for (const [origin, circuit] of this.circuits) yield [origin, circuit.state];
  }

  private open(origin: string, circuit: Circuit, why: string): void {
    circuit.state = 'open';
    circuit.openedAt = this.clock.now();
    circuit.trialInFlight = false;
    circuit.failures = 0;
    this.log.warn({ upstream: origin, reason: why, open_ms: this.options.openMs }, 'upstream circuit opened: requests are refused without connecting');
  }
}
