/** The fetch the verifier uses (Node's global fetch, undici; injected so tests can count or break calls). */
export type Fetch = (input: string, init: RequestInit) => Promise<Response>;

/** The most a provider's answer (discovery document, JWKS, introspection) may weigh. */
export const MAX_PROVIDER_RESPONSE_BYTES = 256 * 1024;
const MAX_REDIRECTS = 3;

/**
 * A request to an OpenID Provider that failed. `unreachable`: no answer in time, a network error,
 * or a 5xx/429 (the login is answered 503, the client may retry); `refused`: an answer that cannot
 * be used (the login is answered the generic 401, the cause goes to the audit trail).
 */
export class ProviderRequestError extends Error {
  constructor(
    readonly kind: 'unreachable' | 'refused',
    message: string,
  ) {
    super(message);
    this.name = 'ProviderRequestError';
  }
}

export interface ProviderResponse {
  status: number;
  body: unknown;
}

/**
 * One JSON request to a provider: bounded in time (`timeoutMs` for the whole exchange, body
 * included) and size, following at most 3 redirects and only within the same origin (GET only: a
 * POST that is redirected is refused, so client credentials never leave for another URL).
 */
export async function providerRequest(
  fetcher: Fetch,
  url: string,
  init: { method: 'GET' | 'POST'; headers?: Record<string, string>; body?: string },
  timeoutMs: number,
): Promise<ProviderResponse> {
  const signal = AbortSignal.timeout(timeoutMs);
  let current = new URL(url);
  for (let hop = 0; ; hop++) {
    let response: Response;
    try {
      response = await fetcher(current.href, {
        method: init.method,
        headers: { accept: 'application/json', ...init.headers },
        ...(init.body !== undefined ? { body: init.body } : {}),
        redirect: 'manual',
        signal,
      });
    } catch (error) {
      throw new ProviderRequestError('unreachable', `${init.method} ${current.href}: ${describe(error)}`);
    }
    if (response.status >= 300 && response.status < 400 && response.headers.has('location')) {
      await response.body?.cancel().catch(() => undefined);
      const target = URL.canParse(response.headers.get('location') ?? '', current) ? new URL(response.headers.get('location') ?? '', current) : undefined;
      if (init.method !== 'GET') throw new ProviderRequestError('refused', `${init.method} ${current.href} was redirected (${response.status}); not followed`);
      if (!target || target.origin !== current.origin) throw new ProviderRequestError('refused', `${current.href} redirects to another host (${target?.origin ?? 'an invalid URL'}); not followed`);
      if (hop >= MAX_REDIRECTS) throw new ProviderRequestError('refused', `${url}: more than ${MAX_REDIRECTS} redirects`);
      current = target;
      continue;
    }
    if (response.status >= 500 || response.status === 429) {
      await response.body?.cancel().catch(() => undefined);
      throw new ProviderRequestError('unreachable', `${init.method} ${current.href} answered ${response.status}`);
    }
    const text = await boundedText(response, current.href, signal);
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new ProviderRequestError('refused', `${init.method} ${current.href} answered ${response.status} with a body that is not JSON`);
    }
    return { status: response.status, body };
  }
}

async function boundedText(response: Response, url: string, signal: AbortSignal): Promise<string> {
  const declared = Number(response.headers.get('content-length') ?? NaN);
  if (declared > MAX_PROVIDER_RESPONSE_BYTES) {
    await response.body?.cancel().catch(() => undefined);
    throw new ProviderRequestError('refused', `${url}: answer of ${declared} bytes exceeds ${MAX_PROVIDER_RESPONSE_BYTES}`);
  }
  if (!response.body) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > MAX_PROVIDER_RESPONSE_BYTES) {
        await reader.cancel().catch(() => undefined);
        throw new ProviderRequestError('refused', `${url}: answer exceeds ${MAX_PROVIDER_RESPONSE_BYTES} bytes`);
      }
      chunks.push(value);
    }
  } catch (error) {
    if (error instanceof ProviderRequestError) throw error;
    throw new ProviderRequestError('unreachable', `${url}: reading the answer failed: ${signal.aborted ? 'timed out' : describe(error)}`);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function describe(error: unknown): string {
  if (error instanceof Error) {
    if (error.name === 'TimeoutError' || error.name === 'AbortError') return 'timed out';
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    return cause?.code ?? cause?.message ?? error.message;
  }
  return String(error);
}
