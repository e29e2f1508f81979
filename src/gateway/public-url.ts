import type { ClientRequest } from './client-exchange.ts';
import { header } from './proxied-request.ts';

/** A Host header safe to build our public base URL from. */
const VALID_HOST = /^[A-Za-z0-9.\-:[\]]+$/;

/**
 * The gateway's public base URL as a client reached it: PUBLIC_URL when fixed, else from the Host
 * header when it is a plain host (the scheme is then http), else PUBLIC_URL.
 */
export class PublicUrl {
  private readonly isHttps: boolean;

  constructor(
    private readonly url: string,
    private readonly fixed: boolean,
  ) {
    this.isHttps = url.startsWith('https:');
  }

  base(request: ClientRequest): string {
    if (this.fixed) return this.url;
    const host = header(request, 'host');
    return host && VALID_HOST.test(host) ? `http://${host}` : this.url;
  }

  /** The scheme of base(request), without building it. */
  protocol(host: string | undefined): 'http' | 'https' {
    if (!this.isHttps) return 'http';
    if (this.fixed) return 'https';
    return host && VALID_HOST.test(host) ? 'http' : 'https';
  }
}
