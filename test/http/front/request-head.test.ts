import http from 'node:http';
import net from 'node:net';
import t from 'tap';
import { RequestHeadParsers, type HeadReading, type RequestHeadLimits } from '../../../src/http/front/request-head.ts';

// The request front's head reader against node's own HTTP parser, on the same bytes. The one
// property that makes the front safe: whatever the reader calls plain, node:http reads the same way
// (method, target, headers as sent) and does not refuse. Everything else (bodies, malformed and
// ambiguous heads, the smuggling shapes) must be "other", so that node:http keeps deciding them.

const limits: RequestHeadLimits = { maxHeaderBytes: 1024, maxHeaders: 20 };

/** What node:http made of one connection's bytes: its first request, or the error it refused them with. */
type NodeReading = { request: { method: string; url: string; httpVersion: string; rawHeaders: string[]; headers: http.IncomingHttpHeaders } } | { error: string } | { nothing: true };

async function nodeServer(t: { teardown(fn: () => unknown): void }): Promise<(bytes: Buffer) => Promise<NodeReading>> {
  const readings = new Map<number, NodeReading>();
  const server = http.createServer({ maxHeaderSize: limits.maxHeaderBytes, insecureHTTPParser: false }, (request, response) => {
    if (!readings.has(request.socket.remotePort!)) {
      readings.set(request.socket.remotePort!, { request: { method: request.method!, url: request.url!, httpVersion: request.httpVersion, rawHeaders: request.rawHeaders, headers: request.headers } });
    }
    request.resume();
    response.end('ok');
  });
  server.maxHeadersCount = limits.maxHeaders;
  server.on('clientError', (error: NodeJS.ErrnoException, socket: net.Socket) => {
    if (!readings.has(socket.remotePort!)) readings.set(socket.remotePort!, { error: error.code ?? error.message });
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const port = (server.address() as net.AddressInfo).port;
  return (bytes) =>
    new Promise((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1', () => socket.end(bytes));
      const local = () => socket.localPort!;
      let port_: number | undefined;
      socket.on('connect', () => (port_ = local()));
      socket.on('data', () => undefined);
      socket.on('error', () => undefined);
      socket.on('close', () => {
        if (port_ === undefined) return reject(new Error('no connection'));
        resolve(readings.get(port_) ?? { nothing: true });
      });
    });
}

/** The reader's verdict on the bytes as one chunk, and, split at every point, as two. */
function readAll(parsers: RequestHeadParsers, bytes: Buffer): HeadReading {
  const reader = parsers.reader();
  try {
    return reader.read(bytes);
  } finally {
    reader.free();
  }
}

function readSplit(parsers: RequestHeadParsers, bytes: Buffer, at: number): HeadReading {
  const reader = parsers.reader();
  try {
    const first = reader.read(bytes.subarray(0, at));
    if (first.kind !== 'partial') return first;
    const second = reader.read(bytes.subarray(at));
    // The first piece was consumed whole; the second's count is its own.
    return second.kind === 'plain' ? { ...second, consumed: second.consumed + at } : second;
  } finally {
    reader.free();
  }
}

const crlf = (...lines: string[]) => Buffer.from(lines.join('\r\n') + '\r\n\r\n', 'latin1');
const padded = (size: number) => {
  // A GET whose whole head is exactly `size` bytes.
  const start = 'GET /compute/v2.1/servers HTTP/1.1\r\nHost: gateway\r\nX-Pad: ';
  return Buffer.from(start + 'a'.repeat(size - start.length - 4) + '\r\n\r\n', 'latin1');
};
const manyHeaders = (count: number) => crlf('GET / HTTP/1.1', 'Host: gateway', ...Array.from({ length: count - 1 }, (_, index) => `X-H${index}: ${index}`));

const corpus: { name: string; bytes: Buffer; plain: boolean }[] = [
  { name: 'a GET', bytes: crlf('GET /compute/v2.1/servers?limit=5 HTTP/1.1', 'Host: gateway', 'X-Auth-Token: gAAAAABtoken', 'Accept: */*'), plain: true },
  { name: 'a HEAD', bytes: crlf('HEAD /placement/ HTTP/1.1', 'Host: gateway'), plain: true },
  { name: 'a DELETE with Content-Length: 0', bytes: crlf('DELETE /placement/resource_providers/1 HTTP/1.1', 'Host: gateway', 'Content-Length: 0'), plain: true },
  { name: 'Connection: close', bytes: crlf('GET / HTTP/1.1', 'Host: gateway', 'Connection: close'), plain: true },
  { name: 'names in mixed case', bytes: crlf('GET / HTTP/1.1', 'hOsT: gateway', 'x-AUTH-token: t'), plain: true },
  { name: 'headers named like an object\'s own properties', bytes: crlf('GET / HTTP/1.1', 'Host: gateway', 'Constructor: c', 'toString: s', 'hasOwnProperty: h'), plain: true },
  { name: 'an empty value', bytes: crlf('GET / HTTP/1.1', 'Host: gateway', 'X-Empty:'), plain: true },
  { name: 'a tab inside a value', bytes: crlf('GET / HTTP/1.1', 'Host: gateway', 'X-Tab: a\tb'), plain: true },
  { name: 'spaces around a value', bytes: crlf('GET / HTTP/1.1', 'Host: gateway', 'X-Spaces:   a b   '), plain: true },
  { name: 'tabs around a value', bytes: crlf('GET / HTTP/1.1', 'Host: gateway', 'X-Tabs:\t\ta \t b\t \t'), plain: true },
  { name: 'a value of spaces only', bytes: crlf('GET / HTTP/1.1', 'Host: gateway', 'X-Blank:    '), plain: true },
  { name: 'bytes past ASCII in a value', bytes: crlf('GET / HTTP/1.1', 'Host: gateway', 'X-Name: Z\u00fcrich \u00e9\u00ff'), plain: true },
  { name: 'an absolute-form target (the front decides on the path)', bytes: crlf('GET http://gateway/compute/ HTTP/1.1', 'Host: gateway'), plain: true },
  { name: 'a percent-encoded target', bytes: crlf('GET /object/v1/a%2Fb/%2e%2e/c HTTP/1.1', 'Host: gateway'), plain: true },
  { name: 'an empty line before the request line', bytes: Buffer.concat([Buffer.from('\r\n'), crlf('GET / HTTP/1.1', 'Host: gateway')]), plain: true },
  { name: 'a head of exactly MAX_HEADER_BYTES', bytes: padded(limits.maxHeaderBytes), plain: true },
  { name: 'exactly maxHeaders headers', bytes: manyHeaders(limits.maxHeaders), plain: true },

  { name: 'a POST', bytes: Buffer.concat([crlf('POST /compute/v2.1/servers HTTP/1.1', 'Host: gateway', 'Content-Length: 2'), Buffer.from('{}')]), plain: false },
  { name: 'a GET with a body', bytes: Buffer.concat([crlf('GET / HTTP/1.1', 'Host: gateway', 'Content-Length: 5'), Buffer.from('hello')]), plain: false },
  { name: 'a GET with a chunked body', bytes: Buffer.concat([crlf('GET / HTTP/1.1', 'Host: gateway', 'Transfer-Encoding: chunked'), Buffer.from('0\r\n\r\n')]), plain: false },
  { name: 'Content-Length and Transfer-Encoding', bytes: Buffer.concat([crlf('GET / HTTP/1.1', 'Host: gateway', 'Content-Length: 0', 'Transfer-Encoding: chunked'), Buffer.from('0\r\n\r\n')]), plain: false },
  { name: 'Content-Length twice, both 0', bytes: crlf('GET / HTTP/1.1', 'Host: gateway', 'Content-Length: 0', 'Content-Length: 0'), plain: false },
  { name: 'Content-Length: 00', bytes: crlf('GET / HTTP/1.1', 'Host: gateway', 'Content-Length: 00'), plain: false },
  { name: 'Content-Length: +0', bytes: crlf('GET / HTTP/1.1', 'Host: gateway', 'Content-Length: +0'), plain: false },
  { name: 'obs-fold', bytes: crlf('GET / HTTP/1.1', 'Host: gateway', 'X-Folded: a', ' b'), plain: false },
  { name: 'bare LF line ends', bytes: Buffer.from('GET / HTTP/1.1\nHost: gateway\n\n'), plain: false },
  { name: 'a bare CR in a value', bytes: crlf('GET / HTTP/1.1', 'Host: gateway', 'X-A: a\rb'), plain: false },
  { name: 'a space before the colon', bytes: crlf('GET / HTTP/1.1', 'Host : gateway'), plain: false },
  { name: 'a NUL in a value', bytes: crlf('GET / HTTP/1.1', 'Host: gateway', 'X-A: a\u0000b'), plain: false },
  { name: 'a control character in a value', bytes: crlf('GET / HTTP/1.1', 'Host: gateway', 'X-A: a\u0001b'), plain: false },
  { name: 'DEL in a value', bytes: crlf('GET / HTTP/1.1', 'Host: gateway', 'X-A: a\u007fb'), plain: false },
  { name: 'DEL in a name', bytes: crlf('GET / HTTP/1.1', 'Host: gateway', 'X-\u007fA: b'), plain: false },
  { name: 'a header name that is not a token', bytes: crlf('GET / HTTP/1.1', 'Host: gateway', 'X@A: b'), plain: false },
  { name: 'whitespace before the first header', bytes: crlf('GET / HTTP/1.1', ' Host: gateway'), plain: false },
  // llhttp takes it, in node:http as here (and reads the same target).
  { name: 'two spaces in the request line', bytes: crlf('GET  / HTTP/1.1', 'Host: gateway'), plain: true },
  { name: 'a lower-case method', bytes: crlf('get / HTTP/1.1', 'Host: gateway'), plain: false },
  { name: 'HTTP/1.0', bytes: crlf('GET / HTTP/1.0', 'Host: gateway'), plain: false },
  { name: 'HTTP/2.0 in an HTTP/1 head', bytes: crlf('GET / HTTP/2.0', 'Host: gateway'), plain: false },
  { name: 'no Host', bytes: crlf('GET / HTTP/1.1', 'Accept: */*'), plain: false },
  { name: 'a repeated header', bytes: crlf('GET / HTTP/1.1', 'Host: gateway', 'X-Auth-Token: one', 'x-auth-token: two'), plain: false },
  { name: 'a repeated Cookie', bytes: crlf('GET / HTTP/1.1', 'Host: gateway', 'Cookie: a=1', 'Cookie: b=2'), plain: false },
  { name: 'a header named __proto__', bytes: crlf('GET / HTTP/1.1', 'Host: gateway', '__proto__: x'), plain: false },
  { name: 'two Hosts', bytes: crlf('GET / HTTP/1.1', 'Host: gateway', 'Host: elsewhere'), plain: false },
  { name: 'Expect: 100-continue', bytes: crlf('GET / HTTP/1.1', 'Host: gateway', 'Expect: 100-continue'), plain: false },
  { name: 'an upgrade', bytes: crlf('GET / HTTP/1.1', 'Host: gateway', 'Connection: Upgrade', 'Upgrade: websocket'), plain: false },
  { name: 'Upgrade without Connection: Upgrade', bytes: crlf('GET / HTTP/1.1', 'Host: gateway', 'Upgrade: h2c'), plain: false },
  { name: 'CONNECT', bytes: crlf('CONNECT gateway:443 HTTP/1.1', 'Host: gateway:443'), plain: false },
  { name: 'OPTIONS', bytes: crlf('OPTIONS * HTTP/1.1', 'Host: gateway'), plain: false },
  { name: 'a head one byte over MAX_HEADER_BYTES', bytes: padded(limits.maxHeaderBytes + 1), plain: false },
  { name: 'a head far over MAX_HEADER_BYTES', bytes: padded(limits.maxHeaderBytes * 4), plain: false },
  { name: 'one header more than maxHeaders', bytes: manyHeaders(limits.maxHeaders + 1), plain: false },
  { name: 'not HTTP at all', bytes: Buffer.from('\u0016\u0003\u0001\u0002\u0000\u0001\u0000\u0001\u00fc\u0003\u0003', 'latin1'), plain: false },
];

t.test('whatever the reader calls plain, node:http reads the same way; the rest is left to node:http', async (t) => {
  const parsers = new RequestHeadParsers(limits);
  const readByNode = await nodeServer(t);
  for (const { name, bytes, plain } of corpus) {
    const ours = readAll(parsers, bytes);
    const node = await readByNode(bytes);
    t.equal(ours.kind, plain ? 'plain' : 'other', `${name}: ${ours.kind === 'other' ? ours.why : ours.kind}`);
    if (ours.kind === 'plain') {
      t.ok('request' in node, `${name}: node:http read a request too (${JSON.stringify(node)})`);
      if ('request' in node) {
        t.same(
          { method: ours.head.method, url: ours.head.target, httpVersion: '1.1', rawHeaders: ours.head.rawHeaders, headers: { ...ours.head.headers } },
          node.request,
          `${name}: the same method, target and headers as node:http`,
        );
      }
      t.equal(ours.consumed, bytes.length, `${name}: the whole request was taken`);
    }
    for (let at = 1; at < bytes.length; at++) {
      const split = readSplit(parsers, bytes, at);
      if (split.kind !== ours.kind || (split.kind === 'plain' && ours.kind === 'plain' && (split.consumed !== ours.consumed || JSON.stringify(split.head) !== JSON.stringify(ours.head)))) {
        t.fail(`${name}: split at ${at} read as ${JSON.stringify(split)}, whole as ${JSON.stringify(ours)}`);
        break;
      }
    }
  }
});

t.test('the malformed heads are the ones node:http refuses, for the reason llhttp gives', async (t) => {
  const parsers = new RequestHeadParsers(limits);
  const readByNode = await nodeServer(t);
  for (const name of ['Content-Length and Transfer-Encoding', 'obs-fold', 'a space before the colon', 'a NUL in a value', 'bare LF line ends', 'a head far over MAX_HEADER_BYTES']) {
    const { bytes } = corpus.find((entry) => entry.name === name)!;
    const node = await readByNode(bytes);
    t.ok('error' in node, `${name}: node:http refuses it (${JSON.stringify(node)})`);
    const ours = readAll(parsers, bytes);
    t.equal(ours.kind, 'other', name);
  }
  const ours = readAll(parsers, corpus.find((entry) => entry.name === 'Content-Length and Transfer-Encoding')!.bytes);
  t.match(ours, { kind: 'other', why: /^malformed: .*Transfer-Encoding can't be present with Content-Length/ });
});

t.test('pipelined requests are read one at a time, each with its own head', async (t) => {
  const parsers = new RequestHeadParsers(limits);
  const first = crlf('GET /a HTTP/1.1', 'Host: gateway', 'X-Auth-Token: one');
  const second = crlf('HEAD /b HTTP/1.1', 'Host: gateway', 'Connection: keep-alive');
  const reader = parsers.reader();
  t.teardown(() => reader.free());
  const both = Buffer.concat([first, second]);
  const one = reader.read(both);
  t.match(one, { kind: 'plain', consumed: first.length, head: { method: 'GET', target: '/a', rawHeaders: ['Host', 'gateway', 'X-Auth-Token', 'one'], headers: { host: 'gateway', 'x-auth-token': 'one' }, keepAlive: true } });
  const two = reader.read(both.subarray(first.length));
  t.match(two, { kind: 'plain', consumed: second.length, head: { method: 'HEAD', target: '/b', rawHeaders: ['Host', 'gateway', 'Connection', 'keep-alive'], keepAlive: true } });
  // A third that is not plain spends the reader: it stays "other" whatever comes next.
  const third = reader.read(crlf('POST /c HTTP/1.1', 'Host: gateway', 'Content-Length: 0'));
  t.match(third, { kind: 'other', why: 'the method may have a body' });
  t.match(reader.read(first), { kind: 'other', why: 'the method may have a body' });
});

t.test('after Connection: close, nothing more is read as a request', async (t) => {
  const parsers = new RequestHeadParsers(limits);
  const reader = parsers.reader();
  t.teardown(() => reader.free());
  const closing = crlf('GET /a HTTP/1.1', 'Host: gateway', 'Connection: close');
  t.match(reader.read(closing), { kind: 'plain', head: { keepAlive: false } });
  t.match(reader.read(crlf('GET /b HTTP/1.1', 'Host: gateway')), { kind: 'other', why: /^malformed: Data after `Connection: close`/ });
});

t.test('a head that grows past MAX_HEADER_BYTES across chunks is left to node:http before it ends', async (t) => {
  const parsers = new RequestHeadParsers(limits);
  const reader = parsers.reader();
  t.teardown(() => reader.free());
  t.match(reader.read(Buffer.from('GET / HTTP/1.1\r\nHost: gateway\r\n')), { kind: 'partial' });
  let reading: HeadReading = { kind: 'partial' };
  for (let piece = 0; piece < 100 && reading.kind === 'partial'; piece++) reading = reader.read(Buffer.from(`X-Piece-${piece}: ${'x'.repeat(40)}\r\n`));
  t.match(reading, { kind: 'other', why: 'the head is larger than MAX_HEADER_BYTES' });
});

t.test('two readers on one instance keep their own state', async (t) => {
  const parsers = new RequestHeadParsers(limits);
  const a = parsers.reader();
  const b = parsers.reader();
  t.teardown(() => {
    a.free();
    b.free();
  });
  t.match(a.read(Buffer.from('GET /a HTTP/1.1\r\nHo')), { kind: 'partial' });
  t.match(b.read(Buffer.from('DELETE /b HTTP/1.1\r\nHost: b\r\nX-B: 1\r\n')), { kind: 'partial' });
  t.match(a.read(Buffer.from('st: a\r\n\r\n')), { kind: 'plain', head: { method: 'GET', target: '/a', rawHeaders: ['Host', 'a'] } });
  t.match(b.read(Buffer.from('\r\n')), { kind: 'plain', head: { method: 'DELETE', target: '/b', rawHeaders: ['Host', 'b', 'X-B', '1'] } });
});
