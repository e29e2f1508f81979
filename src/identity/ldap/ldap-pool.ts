import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import type { Client } from 'ldapts';
import { UnavailableError } from '../../support/errors.ts';
import type { LdapOptions } from './ldap-options.ts';

/** Keystone's connection_timeout of -1 leaves connecting to the OS (minutes); a directory outage must answer sooner. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;

// LDAP result codes that say the server cannot serve now (busy, unavailable, unwilling, other).
const SERVER_UNAVAILABLE_CODES = new Set([51, 52, 53, 80]);

type Ldapts = typeof import('ldapts');

/**
 * Whether an error means the directory could not be reached or answered in time (not an LDAP
 * answer). Before ldapts is loaded (`library` undefined) no error can be one of its answers.
 */
function isOutage(error: unknown, library: Ldapts | undefined): boolean {
  if (library && error instanceof library.ResultCodeError) return SERVER_UNAVAILABLE_CODES.has(error.code);
  return true;
}

/**
 * The directory of one domain: a small pool of connections bound as the configured `user` for
 * searches, and a fresh connection per password check (a simple bind as the user's DN), each with
 * connection and operation timeouts. A connection that fails is dropped and a new one made on the
 * next use, so the pool recovers by itself once the server is back. Every failure to reach the
 * server is an UnavailableError (503).
 */
export class LdapPool {
  private readonly idle: Client[] = [];
  private open = 0;
  private readonly waiting: Array<(client: Client | Error) => void> = [];
  private closed = false;
  /** ldapts, loaded with the first connection: a service without LDAP domains never holds its code. */
  private ldapts: Ldapts | undefined;
  private readonly tlsOptions: ConnectionOptions | undefined;
  /** tls_cacertfile could not be read: every connection fails (503), as Keystone refuses to connect (its IOError). */
  private readonly tlsProblem: Error | undefined;

  constructor(private readonly options: LdapOptions) {
    const secure = options.useTls || /^ldaps:/i.test(options.url);
    let ca: Buffer | undefined;
    if (secure && options.tlsCacertfile) {
      try {
        ca = readFileSync(options.tlsCacertfile);
      } catch {
        this.tlsProblem = new Error(`tls_cacertfile ${options.tlsCacertfile} not found or is not a file`);
      }
    }
    // Keystone's tls_req_cert: demand verifies the server's certificate (chain and name); allow and
    // never (OpenLDAP's semantics) proceed whatever the certificate.
    this.tlsOptions = secure ? { rejectUnauthorized: options.tlsReqCert === 'demand', ...(ca ? { ca } : {}) } : undefined;
  }

  private get connectTimeoutMs(): number {
    return this.options.connectionTimeout > 0 ? this.options.connectionTimeout * 1000 : DEFAULT_CONNECT_TIMEOUT_MS;
  }

  private get operationTimeoutMs(): number {
    return this.options.operationTimeout * 1000;
  }

  /**
   * A connected client (StartTLS when use_tls), not yet bound. ldapts speaks TLS from the first byte
   * whenever the client is given tlsOptions, so with StartTLS they go to startTLS only (which also
   * mutates them: a copy each time), with the URL's host, which tls.connect would otherwise take
   * to be "localhost" when checking the certificate's name.
   */
  private async connect(): Promise<Client> {
    if (this.tlsProblem) throw this.tlsProblem;
    const { Client } = (this.ldapts ??= await import('ldapts'));
    const client = new Client({
      url: this.options.url,
      connectTimeout: this.connectTimeoutMs,
      ...(this.operationTimeoutMs > 0 ? { timeout: this.operationTimeoutMs } : {}),
      ...(this.tlsOptions && !this.options.useTls ? { tlsOptions: this.tlsOptions } : {}),
      strictDN: false,
    });
    if (this.options.useTls) {
      try {
        await client.startTLS({ ...this.tlsOptions, host: urlHost(this.options.url) });
      } catch (error) {
        await quietlyUnbind(client);
        throw error;
      }
    }
    return client;
  }

  private async newAdminClient(): Promise<Client> {
    const client = await this.connect();
    try {
      if (this.options.user) await client.bind(this.options.user, this.options.password ?? '');
      return client;
    } catch (error) {
      await quietlyUnbind(client);
      throw error;
    }
  }

  /**
   * Runs `work` on a pooled admin connection. A connection whose work failed to reach the server is
   * dropped; if it was an idle one (the server may have closed it meanwhile), the work is tried once
   * more on a new connection, so the first request after the server is back succeeds.
   */
  async withConnection<T>(work: (client: Client) => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      let pooled: { client: Client; reused: boolean };
      try {
        pooled = await this.acquire();
      } catch {
        // Unreachable, or the configured user's bind refused: either way the directory cannot serve.
        throw UnavailableError.directory();
      }
      try {
        const result = await work(pooled.client);
        this.release(pooled.client);
        return result;
      } catch (error) {
        if (!isOutage(error, this.ldapts)) {
          this.release(pooled.client);
          throw error;
        }
        this.discard(pooled.client);
        if (!pooled.reused || attempt > 0) throw UnavailableError.directory();
      }
    }
  }

  /**
   * Whether `password` is the password of the entry `dn`: a simple bind on a connection of its own.
   * An empty password is refused without asking (LDAP would take it as an anonymous bind).
   */
  async checkPassword(dn: string, password: string): Promise<boolean> {
    if (password === '') return false;
    let client: Client | undefined;
    try {
      client = await this.connect();
      await client.bind(dn, password);
      return true;
    } catch (error) {
      const library = this.ldapts;
      if (library && error instanceof library.InvalidCredentialsError) return false;
      if (library && error instanceof library.ResultCodeError && !isOutage(error, library)) return false;
      throw UnavailableError.directory();
    } finally {
      if (client) await quietlyUnbind(client);
    }
  }

  /** Closes every connection; later uses fail. */
  async close(): Promise<void> {
    this.closed = true;
    for (const waiter of this.waiting.splice(0)) waiter(new Error('closed'));
    await Promise.all(this.idle.splice(0).map(quietlyUnbind));
  }

  private async acquire(): Promise<{ client: Client; reused: boolean }> {
    if (this.closed) throw new Error('closed');
    const ready = this.idle.pop();
    if (ready) {
      if (ready.isConnected) return { client: ready, reused: true };
      this.open--;
      await quietlyUnbind(ready);
    }
    if (this.open < this.options.poolSize) {
      this.open++;
      try {
        return { client: await this.newAdminClient(), reused: false };
      } catch (error) {
        this.open--;
        this.wakeOne();
        throw error;
      }
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        const index = this.waiting.indexOf(handOver);
        if (index >= 0) this.waiting.splice(index, 1);
        reject(new Error('no pooled LDAP connection became free in time'));
      }, this.connectTimeoutMs + this.operationTimeoutMs);
      const handOver = (client: Client | Error) => {
        clearTimeout(timer);
        if (client instanceof Error) reject(client);
        else resolve({ client, reused: true });
      };
      this.waiting.push(handOver);
    });
  }

  private release(client: Client): void {
    const waiter = this.waiting.shift();
    if (waiter) waiter(client);
    else if (this.closed) void quietlyUnbind(client);
    else this.idle.push(client);
  }

  private discard(client: Client): void {
    this.open--;
    void quietlyUnbind(client);
    this.wakeOne();
  }

  /** A waiter gets a new connection when one was dropped (it may fail in turn). */
  private wakeOne(): void {
    const waiter = this.waiting.shift();
    if (!waiter) return;
    this.open++;
    this.newAdminClient().then(waiter, (error: unknown) => {
      this.open--;
      waiter(error instanceof Error ? error : new Error(String(error)));
    });
  }
}

/** The host of an ldap:// URL, without an IPv6 literal's brackets. */
function urlHost(url: string): string {
  const host = new URL(url).hostname;
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host || 'localhost';
}

async function quietlyUnbind(client: Client): Promise<void> {
  try {
    await client.unbind();
  } catch {
    // Already gone: nothing to close.
  }
}
