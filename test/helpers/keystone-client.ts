/** A small Keystone client for tests that drive real service processes. */

export interface Answer {
  status: number;
  /** X-Subject-Token of the answer ('' when absent). */
  token: string;
  body: any;
  /** Milliseconds from sending to the whole answer. */
  ms: number;
}

export interface CallOptions {
  method?: string;
  token?: string;
  subject?: string;
  body?: unknown;
  /** Give up (status 0) after this long; a test must never hang on a request. */
  timeoutMs?: number;
  /** More request headers. */
  headers?: Record<string, string>;
}

/** One request; a connection failure or timeout is status 0, never a throw. */
export async function call(url: string, options: CallOptions = {}): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  if (options.token) headers['x-auth-token'] = options.token;
  if (options.subject) headers['x-subject-token'] = options.subject;
  Object.assign(headers, options.headers);
  const started = Date.now();
  try {
    const response = await fetch(url, {
      method: options.method ?? 'GET',
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      signal: AbortSignal.timeout(options.timeoutMs ?? 20_000),
    });
    const text = await response.text();
    let body: unknown;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = text;
    }
    return { status: response.status, token: response.headers.get('x-subject-token') ?? '', body, ms: Date.now() - started };
  } catch {
    return { status: 0, token: '', body: undefined, ms: Date.now() - started };
  }
}

export function passwordAuth(user: { id: string } | { name: string; domainId: string }, password: string, scope?: unknown) {
  const named = 'name' in user ? { name: user.name, domain: { id: user.domainId } } : { id: user.id };
  return { auth: { identity: { methods: ['password'], password: { user: { ...named, password } } }, ...(scope ? { scope } : {}) } };
}

/** A system-scoped admin token (bootstrap's admin). */
export async function adminToken(url: string, password: string): Promise<string> {
  const answer = await call(`${url}/v3/auth/tokens`, { method: 'POST', body: passwordAuth({ name: 'admin', domainId: 'default' }, password, { system: { all: true } }) });
  if (answer.status !== 201) throw new Error(`admin login failed: ${answer.status} ${JSON.stringify(answer.body)}`);
  return answer.token;
}

/**
 * When a check starts passing, measured from `since`: a probe every `everyMs`, none waiting for the
 * one before (a probe sent after the last one's answer is a round trip late on a loaded machine). The
 * send time of the earliest probe that passed (the probes still out are awaited: an earlier one may
 * pass too), or -1 when none passed within `limitMs`.
 */
export function firstPassingSend(check: () => Promise<boolean>, since: number, limitMs = 2000, everyMs = 10): Promise<number> {
  return new Promise<number>((resolve) => {
    const passedAt: number[] = [];
    let inFlight = 0;
    let sending = true;
    const settle = () => {
      if (!sending && inFlight === 0) resolve(passedAt.length > 0 ? Math.min(...passedAt) : -1);
    };
    const probe = () => {
      const sentAt = Date.now();
      if (!sending || sentAt - since >= limitMs) {
        sending = false;
        settle();
        return;
      }
      inFlight++;
      check()
        .then(
          (passed) => {
            if (!passed) return;
            passedAt.push(sentAt - since);
            sending = false;
          },
          () => {},
        )
        .finally(() => {
          inFlight--;
          settle();
        });
      setTimeout(probe, everyMs);
    };
    probe();
  });
}

/** Polls `check` until it holds (then true) or `timeoutMs` passes (then false). */
export async function eventually(check: () => Promise<boolean> | boolean, timeoutMs: number, intervalMs = 50): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
