import net from 'node:net';

/**
 * How a cut looks to the service:
 * - 'reset': every live connection is destroyed on both sides, and new ones are accepted and
 *   destroyed at once (the server process is gone: the client sees the connection end at once).
 *   The relay keeps its port, so no other process can take it and restore() is immediate; a
 *   stopped listener would give ECONNREFUSED instead, which drivers handle the same way.
 * - 'blackhole': a network partition. Live connections stay open but nothing passes either way:
 *   the bytes either side sends are read and dropped (nothing backs up, nothing is refused), and
 *   new connections are accepted and treated alike, so the client only learns of it from its own
 *   timeouts (and neither side hears the other close its connection). restore() destroys the connections held meanwhile (bytes were dropped: they cannot
 *   be resumed).
 */
export type CutMode = 'reset' | 'blackhole';

export interface TcpRelay {
  /** host:port to give the client instead of the target's. */
  readonly host: string;
  readonly port: number;
  /** `url` with its host and port replaced by the relay's (postgres://…, redis://…). */
  urlFor(url: string): string;
  cut(mode?: CutMode): void;
  restore(): void;
  /** Connections currently relayed (or held during a blackhole). */
  readonly connections: number;
  close(): Promise<void>;
}

interface Pair {
  client: net.Socket;
  server: net.Socket | undefined;
}

/**
 * A relay from an ephemeral local port to target host:port; the test cuts and restores it.
 * `onAccept` runs as each client connection is accepted (before the relay connects on), e.g. to hold
 * the event loop while the client is opening its connection.
 */
export async function startTcpRelay(targetHost: string, targetPort: number, options: { onAccept?: () => void } = {}): Promise<TcpRelay> {
  const pairs = new Set<Pair>();
  let state: 'open' | CutMode = 'open';

  const drop = (pair: Pair) => {
    pair.client.destroy();
    pair.server?.destroy();
    pairs.delete(pair);
  };
  // One side closing: the other hears of it, except across a blackhole (until restore()).
  const closed = (pair: Pair) => {
    if (state !== 'blackhole') drop(pair);
  };

  const listener = net.createServer((client) => {
    client.on('error', () => {});
    options.onAccept?.();
    if (state === 'reset') {
      client.destroy();
      return;
    }
    const pair: Pair = { client, server: undefined };
    pairs.add(pair);
    client.on('close', () => closed(pair));
    if (state === 'blackhole') {
      client.resume(); // flowing with no reader: every byte is dropped
      return;
    }
    const server = net.connect(targetPort, targetHost);
    pair.server = server;
    server.on('error', () => {});
    server.on('close', () => closed(pair));
    client.pipe(server);
    server.pipe(client);
  });
  await new Promise<void>((resolve, reject) => {
    listener.once('error', reject);
    listener.listen(0, '127.0.0.1', () => resolve());
  });
  const address = listener.address() as net.AddressInfo;

  return {
    host: '127.0.0.1',
    port: address.port,
    urlFor(url: string) {
      const parsed = new URL(url);
      parsed.hostname = '127.0.0.1';
      parsed.port = String(address.port);
      return parsed.toString();
    },
    cut(mode: CutMode = 'reset') {
      state = mode;
      for (const pair of [...pairs]) {
        if (mode === 'reset') {
          drop(pair);
        } else {
          // Nothing more passes; what was already in flight, and all that follows, is dropped.
          pair.client.unpipe();
          pair.server?.unpipe();
          pair.client.resume();
          pair.server?.resume();
        }
      }
    },
    restore() {
      if (state === 'blackhole') for (const pair of [...pairs]) drop(pair);
      state = 'open';
    },
    get connections() {
      return pairs.size;
    },
    async close() {
      for (const pair of [...pairs]) drop(pair);
      await new Promise<void>((resolve) => listener.close(() => resolve()));
    },
  };
}
