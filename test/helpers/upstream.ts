import http from 'node:http';
import net from 'node:net';

export interface ReceivedRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  /** Header lines as they arrived: [name, value, name, value, …], names in their own spelling. */
  rawHeaders: string[];
  body: string;
}

export interface EchoUpstream {
  url: string;
  port: number;
  received: ReceivedRequest[];
  /** Milliseconds to wait before answering (to provoke timeouts). */
  delayMs: number;
  /** Holds every answer (recorded requests stay recorded) until the returned function is called. */
  holdAnswers(): () => void;
  /** TCP connections accepted so far. */
  readonly connections: number;
  close(): Promise<void>;
}

/**
 * A real HTTP service for the gateway to forward to: it records each request and answers with a
 * JSON echo of it. POST /things answers 201 with an absolute Location on its own address, a GET of
 * …/redirect 302 with one.
 */
export async function startEchoUpstream(
  port = 0,
  options: { /** SO_REUSEPORT: to listen on a port a reservePort() holds (test/helpers/processes.ts). */ reusePort?: boolean } = {},
): Promise<EchoUpstream> {
  const received: ReceivedRequest[] = [];
  const state: { delayMs: number; connections: number; held?: Promise<void> } = { delayMs: 0, connections: 0 };
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const record = { method: request.method ?? '', url: request.url ?? '', headers: request.headers, rawHeaders: request.rawHeaders, body: Buffer.concat(chunks).toString() };
      received.push(record);
      const answer = () => {
        const body = JSON.stringify(record);
        const headers: http.OutgoingHttpHeaders = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) };
        if (request.method === 'POST' && request.url?.endsWith('/things')) {
          headers.location = `http://127.0.0.1:${boundPort}${request.url}/thing-1`;
          response.writeHead(201, headers);
        } else if (request.method === 'GET' && request.url?.endsWith('/redirect')) {
          headers.location = `http://127.0.0.1:${boundPort}${request.url.replace(/\/redirect$/, '/thing-1')}`;
          response.writeHead(302, headers);
        } else {
          response.writeHead(200, headers);
        }
        response.end(body);
      };
      if (state.held) void state.held.then(answer);
      else if (state.delayMs) setTimeout(answer, state.delayMs);
      else answer();
    });
  });
  server.on('connection', () => state.connections++);
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen({ port, host: '127.0.0.1', reusePort: options.reusePort ?? false }, resolve));
  const address = server.address();
  const boundPort = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${boundPort}`,
    port: boundPort,
    received,
    get connections() {
      return state.connections;
    },
    get delayMs() {
      return state.delayMs;
    },
    set delayMs(value: number) {
      state.delayMs = value;
    },
    holdAnswers() {
      let release!: () => void;
      state.held = new Promise<void>((resolve) => (release = resolve));
      return () => {
        state.held = undefined;
        release();
      };
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A request with the path exactly as given (fetch would normalise it). */
export function rawRequest(
  port: number,
  options: { method?: string; path: string; headers?: Record<string, string>; body?: string },
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const request = http.request({ host: '127.0.0.1', port, method: options.method ?? 'GET', path: options.path, headers: options.headers }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks).toString() }));
    });
    request.on('error', reject);
    if (options.body !== undefined) request.write(options.body);
    request.end();
  });
}

/**
 * A request with header lines written exactly as given (names in any spelling, repeated names kept
 * apart), over a raw socket: Node's client would lower-case and merge them. The connection closes
 * after the answer.
 */
export function rawHeaderRequest(
  port: number,
  options: { method?: string; path: string; headers: [name: string, value: string][] },
): Promise<{ status: number; head: string; body: string }> {
  const lines = [`${options.method ?? 'GET'} ${options.path} HTTP/1.1`, `Host: 127.0.0.1:${port}`, 'Connection: close'];
  for (const [name, value] of options.headers) lines.push(`${name}: ${value}`);
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(`${lines.join('\r\n')}\r\n\r\n`));
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('end', () => {
      const text = Buffer.concat(chunks).toString('latin1');
      const split = text.indexOf('\r\n\r\n');
      const head = split === -1 ? text : text.slice(0, split);
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0), head, body: split === -1 ? '' : text.slice(split + 4) });
    });
  });
}

/**
 * The CGI/WSGI environ keys a Python service behind the gateway would build from these header lines
 * (PEP 3333: HTTP_ + upper case, '-' → '_'; eventlet.wsgi joins repeated keys with ','): both
 * spellings of a name land on one key, which is why the gateway forwards no name with '_'.
 */
export function wsgiEnviron(rawHeaders: readonly string[]): Record<string, string> {
  const environ: Record<string, string> = {};
  for (let index = 0; index < rawHeaders.length; index += 2) {
    const key = `HTTP_${rawHeaders[index]!.toUpperCase().replace(/-/g, '_')}`;
    const value = rawHeaders[index + 1]!;
    environ[key] = key in environ ? `${environ[key]},${value}` : value;
  }
  return environ;
}
