import type { InjectOptions, LightMyRequestResponse } from 'fastify';

/** What a browser got back: status, headers as a fetch Response has them, and the body's text. */
export interface BrowserResponse {
  url: string;
  status: number;
  location: string | undefined;
  setCookies: string[];
  contentType: string;
  body: string;
}

interface StoredCookie {
  value: string;
  path: string;
}

/**
 * A headless browser for redirect flows: a cookie jar per host (Path honoured, Max-Age=0 deletes),
 * no JavaScript, no automatic redirects. Requests to `injectHost` (the service under test, e.g.
 * keystone.test:5000) go through fastify's inject; any other goes over the network with fetch.
 */
export class HeadlessBrowser {
  readonly jar = new Map<string, Map<string, StoredCookie>>();

  constructor(
    private readonly injectHost: string,
    private readonly inject: (options: InjectOptions) => Promise<LightMyRequestResponse>,
  ) {}

  /** The cookies the jar would send to `url`. */
  cookiesFor(url: string): Record<string, string> {
    const target = new URL(url);
    const cookies: Record<string, string> = {};
    for (const [name, cookie] of this.jar.get(target.host) ?? []) if (target.pathname.startsWith(cookie.path)) cookies[name] = cookie.value;
    return cookies;
  }

  setCookie(url: string, name: string, value: string, path = '/'): void {
    const host = new URL(url).host;
    if (!this.jar.has(host)) this.jar.set(host, new Map());
    this.jar.get(host)!.set(name, { value, path });
  }

  async request(url: string, init: { method?: 'GET' | 'POST'; form?: Record<string, string> } = {}): Promise<BrowserResponse> {
    const target = new URL(url);
    const cookie = Object.entries(this.cookiesFor(url))
      .map(([name, value]) => `${name}=${value}`)
      .join('; ');
    const headers: Record<string, string> = { ...(cookie ? { cookie } : {}), ...(init.form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) };
    const body = init.form ? new URLSearchParams(init.form).toString() : undefined;
    let response: BrowserResponse;
    if (target.host === this.injectHost) {
      const answer = await this.inject({ method: init.method ?? 'GET', url: `${target.pathname}${target.search}`, headers: { host: target.host, ...headers }, ...(body !== undefined ? { payload: body } : {}) });
      const setCookie = answer.headers['set-cookie'];
      response = {
        url,
        status: answer.statusCode,
        location: typeof answer.headers.location === 'string' ? answer.headers.location : undefined,
        setCookies: setCookie === undefined ? [] : Array.isArray(setCookie) ? setCookie : [String(setCookie)],
        contentType: String(answer.headers['content-type'] ?? ''),
        body: answer.body,
      };
    } else {
      const answer = await fetch(url, { method: init.method ?? 'GET', headers, ...(body !== undefined ? { body } : {}), redirect: 'manual' });
      response = {
        url,
        status: answer.status,
        location: answer.headers.get('location') ?? undefined,
        setCookies: answer.headers.getSetCookie(),
        contentType: answer.headers.get('content-type') ?? '',
        body: await answer.text(),
      };
    }
    this.keep(target, response.setCookies);
    return response;
  }

  private keep(target: URL, setCookies: string[]): void {
    if (!this.jar.has(target.host)) this.jar.set(target.host, new Map());
    const jar = this.jar.get(target.host)!;
    for (const line of setCookies) {
      const [pair, ...attributes] = line.split(';');
      const index = pair!.indexOf('=');
      const name = pair!.slice(0, index).trim();
      const value = pair!.slice(index + 1).trim();
      const attribute = (key: string) => attributes.map((entry) => entry.trim()).find((entry) => entry.toLowerCase().startsWith(`${key}=`))?.slice(key.length + 1);
      const maxAge = attribute('max-age');
      const expired = (maxAge !== undefined && Number(maxAge) <= 0) || /expires=Thu, 01 Jan 1970/i.test(line);
      if (expired || value === '') jar.delete(name);
      else jar.set(name, { value, path: attribute('path') ?? '/' });
    }
  }
}
