import type { Socket } from 'node:net';

/**
 * Reads of accepted sockets into one buffer, handed to a callback during the read: what
 * `net.connect({ onread })` does for a socket node connects (the upstream pool uses it), and what
 * node offers no option for on a socket a server accepts. Each read then skips the stream: no new
 * buffer per read, no `push`, no 'data' event, no tick to read more (~4k instructions per proxied
 * request, bench/README.md).
 *
 * It sets the two fields net.Socket's `onread` option sets (found by their symbols' descriptions,
 * `kBuffer` and `kBufferCb`), and the handle's `useUserBuffer`, as node's initSocketHandle() does.
 * Those are node's internals: where a runtime lacks them, `attach` answers false and the caller
 * reads 'data' events as before. test/http/front/shared-reads.test.ts fails on a runtime where they
 * changed, so that an upgrade does not lose this silently.
 *
 * What a callback is handed is a view on the shared buffer, valid until it returns: what must
 * outlive the read is copied.
 */

/** The most one read takes (node's own read size). */
const READ_BUFFER_BYTES = 65_536;

interface SocketFields {
  buffer: symbol;
  callback: symbol;
}

interface UserBufferHandle {
  useUserBuffer(buffer: Uint8Array): void;
}

export class SharedReads {
  readonly buffer = Buffer.allocUnsafeSlow(READ_BUFFER_BYTES);
  /** net.Socket's fields, looked up on the first socket; null: this runtime has none. */
  private fields: SocketFields | null | undefined;

  /**
   * From now on, the socket's reads go to `callback` (length read, the shared buffer), not to its
   * stream. false: this runtime cannot (a socket that is not a plain TCP one, or node's internals
   * changed); nothing was changed.
   */
  attach(socket: Socket, callback: (length: number, buffer: Buffer) => void): boolean {
    // (A socket without a TCP handle, e.g. a stream emitted as a connection, says nothing of the runtime.)
    const handle = (socket as unknown as { _handle?: Partial<UserBufferHandle> | null })._handle;
    if (typeof handle?.useUserBuffer !== 'function') return false;
    const fields = this.fieldsOf(socket);
    if (fields === null) return false;
    const own = socket as unknown as Record<symbol, unknown>;
    // Not a socket that already reads into a buffer of its own (a connected one's `onread`).
    if (own[fields.buffer] !== null) return false;
    handle.useUserBuffer(this.buffer);
    own[fields.buffer] = this.buffer;
    // (node stops reading when the callback returns false; a void callback never does.)
    own[fields.callback] = callback;
    return true;
  }

  /**
   * The socket's reads go back to its stream, each copied out of the shared buffer ('data', or
   * node:http's parser, which reads the handle itself once it has taken the connection).
   */
  detach(socket: Socket): void {
    const fields = this.fields;
    if (!fields) return;
    const own = socket as unknown as Record<symbol, unknown>;
    if (own[fields.buffer] !== this.buffer) return;
    // false stops the reads (the stream is full); its next read() or resume() starts them again.
    own[fields.callback] = (length: number, buffer: Buffer): boolean => socket.push(Buffer.from(buffer.subarray(0, length)));
  }

  private fieldsOf(socket: Socket): SocketFields | null {
    if (this.fields !== undefined) return this.fields;
    let buffer: symbol | undefined;
    let callback: symbol | undefined;
    const own = socket as unknown as Record<symbol, unknown>;
    for (const symbol of Object.getOwnPropertySymbols(socket)) {
      // Both start as null on a socket made without `onread`.
      if (symbol.description === 'kBuffer' && own[symbol] === null) buffer = symbol;
      else if (symbol.description === 'kBufferCb' && own[symbol] === null) callback = symbol;
    }
    this.fields = buffer && callback ? { buffer, callback } : null;
    return this.fields;
  }
}
