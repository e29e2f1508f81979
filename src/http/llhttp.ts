import { createRequire } from 'node:module';

/**
 * llhttp, the HTTP/1 parser of Node and undici, in the WebAssembly build undici ships
 * (lib/llhttp/, not an export of its package: undici's version is pinned in package.json, and the
 * parsers' tests fail at once if a release moves the file). The upstream client reads responses
 * with it (gateway/upstream-pool.ts) and the request front reads request heads (http/front/).
 *
 * An instance's callbacks are its imports, fixed when it is made, so each user keeps one instance
 * and notes, while `llhttp_execute` runs, which parser and which chunk the callbacks belong to
 * (LlhttpRun).
 */

// llhttp's numbers (llhttp/constants.js).
export const TYPE_REQUEST = 1;
export const TYPE_RESPONSE = 2;
export const OK = 0;
/** Returned by a callback to stop execute() (it answers PAUSED, the position is where it stopped). */
export const PAUSED = 21;
/** Returned by a callback to fail execute() (HPE_USER). */
export const USER_ERROR = -1;
/** From on_headers_complete: the message has no body (the answer to a HEAD). */
export const SKIP_BODY = 1;

export interface LlhttpExports {
  memory: WebAssembly.Memory;
  llhttp_alloc(type: number): number;
  llhttp_free(parser: number): void;
  llhttp_execute(parser: number, data: number, length: number): number;
  llhttp_finish(parser: number): number;
  llhttp_resume(parser: number): void;
  llhttp_reset(parser: number): void;
  llhttp_get_error_pos(parser: number): number;
  llhttp_get_error_reason(parser: number): number;
  llhttp_get_errno(parser: number): number;
  llhttp_get_method(parser: number): number;
  llhttp_get_http_major(parser: number): number;
  llhttp_get_http_minor(parser: number): number;
  llhttp_should_keep_alive(parser: number): number;
  malloc(size: number): number;
  free(pointer: number): void;
}

/** The callbacks llhttp calls; `at` is an address in the instance's memory. Each answers OK, PAUSED or USER_ERROR. */
export interface LlhttpCallbacks {
  wasm_on_message_begin(parser: number): number;
  wasm_on_url(parser: number, at: number, length: number): number;
  wasm_on_status(parser: number, at: number, length: number): number;
  wasm_on_header_field(parser: number, at: number, length: number): number;
  wasm_on_header_value(parser: number, at: number, length: number): number;
  /** `status` is 0 for a request; `upgrade` and `keepAlive` are 1 or 0. */
  wasm_on_headers_complete(parser: number, status: number, upgrade: number, keepAlive: number): number;
  wasm_on_body(parser: number, at: number, length: number): number;
  wasm_on_message_complete(parser: number): number;
}

/** A new llhttp instance with these callbacks (the SIMD build where the CPU has it). */
function instantiateLlhttp(callbacks: LlhttpCallbacks): LlhttpExports {
  const require = createRequire(import.meta.url);
  let wasm: WebAssembly.Module;
  try {
    wasm = new WebAssembly.Module(require('undici/lib/llhttp/llhttp_simd-wasm.js') as Uint8Array<ArrayBuffer>);
  } catch {
    wasm = new WebAssembly.Module(require('undici/lib/llhttp/llhttp-wasm.js') as Uint8Array<ArrayBuffer>);
  }
  const instance = new WebAssembly.Instance(wasm, { env: { ...callbacks } });
  return instance.exports as unknown as LlhttpExports;
}

/** How much of a chunk is decoded at once for the text llhttp reports (a longer head is read piece by piece). */
const TEXT_WINDOW = 8192;

/**
 * One llhttp instance, shared by many owners (connections, each with a parser of its own), and the
 * run under way on it: while `execute` runs, `current` is the owner and the chunk the callbacks
 * belong to. The callbacks are made once, with the run, and reach their owner through `current`.
 */
export class LlhttpRun<Owner> {
  readonly llhttp: LlhttpExports;
  /** The owner whose chunk llhttp is reading (null between runs). */
  current: Owner | null = null;
  /** Where in its chunk the last execute stopped: the chunk's length when it answered OK. */
  stoppedAt = 0;
  private chunk: Buffer | null = null;
  private input = 0;
  private readonly inputBuffer: LlhttpInput;
  /**
   * The chunk as text, from the first span llhttp reported in it (`decodedFrom`, -1 until then) for
   * at most TEXT_WINDOW bytes: decoded once per chunk, each name and value then a substring of it.
   * A Buffer.toString() per name and per value was ten calls into C++ per head, more than all the
   * rest of reading it.
   */
  private decoded = '';
  private decodedFrom = -1;

  constructor(
    /** TYPE_REQUEST or TYPE_RESPONSE: what its parsers read. */
    private readonly type: number,
    callbacks: (run: LlhttpRun<Owner>) => LlhttpCallbacks,
  ) {
    this.llhttp = instantiateLlhttp(callbacks(this));
    this.inputBuffer = new LlhttpInput(this.llhttp);
  }

  /** A parser of this instance, for one owner. */
  alloc(): number {
    return this.llhttp.llhttp_alloc(this.type);
  }

  free(parser: number): void {
    this.llhttp.llhttp_free(parser);
  }

  /** Feeds `chunk` to `owner`'s parser: llhttp's answer (where it stopped is then `stoppedAt`). */
  execute(owner: Owner, parser: number, chunk: Buffer): number {
    const llhttp = this.llhttp;
    // One shared instance: a callback that fed another owner from inside would corrupt both.
    if (this.current) throw new Error('llhttp is already executing for another connection');
    const input = this.inputBuffer.copy(chunk);
    this.input = input;
    this.current = owner;
    this.chunk = chunk;
    this.decodedFrom = -1;
    let code: number;
    try {
      code = llhttp.llhttp_execute(parser, input, chunk.length);
    } finally {
      this.current = null;
      this.chunk = null;
      this.decoded = '';
    }
    this.stoppedAt = code === OK ? chunk.length : llhttp.llhttp_get_error_pos(parser) - input;
    return code;
  }

  /** The peer closed its side: lets llhttp complete a message whose end is the connection's end. */
  finish(owner: Owner, parser: number): number {
    this.current = owner;
    try {
      return this.llhttp.llhttp_finish(parser);
    } finally {
      this.current = null;
    }
  }

  resume(parser: number): void {
    this.llhttp.llhttp_resume(parser);
  }

  reason(parser: number, otherwise: string): string {
    return errorReason(this.llhttp, parser, otherwise);
  }

  /** From a callback: the span of the chunk at `at` (an address in the instance's memory), as text. */
  text(at: number, length: number): string {
    const chunk = this.chunk!;
    const start = at - this.input;
    if (this.decodedFrom < 0) {
      this.decodedFrom = start;
      this.decoded = chunk.toString('latin1', start, Math.min(chunk.length, start + TEXT_WINDOW));
    }
    const from = start - this.decodedFrom;
    if (from >= 0 && from + length <= this.decoded.length) return this.decoded.substring(from, from + length);
    return chunk.toString('latin1', start, start + length);
  }

  /** From a callback: the span of the chunk at `at`, as a view of the chunk (valid while it is). */
  bytes(at: number, length: number): Buffer {
    const start = at - this.input;
    return this.chunk!.subarray(start, start + length);
  }
}

/** Where chunks are copied in an instance's memory for llhttp_execute (one per instance). */
class LlhttpInput {
  private pointer = 0;
  private size = 0;
  private view: Uint8Array | undefined;

  constructor(private readonly llhttp: LlhttpExports) {}

  /** Copies `chunk` in; its address in the instance's memory. */
  copy(chunk: Uint8Array): number {
    const llhttp = this.llhttp;
    if (chunk.length > this.size) {
      if (this.pointer) llhttp.free(this.pointer);
      this.size = Math.ceil(chunk.length / 4096) * 4096;
      this.pointer = llhttp.malloc(this.size);
    }
    // One view of the whole memory, made again only once the memory has grown (which detaches it):
    // a view per chunk cost ~600 instructions.
    if (this.view?.buffer !== llhttp.memory.buffer) this.view = new Uint8Array(llhttp.memory.buffer);
    this.view.set(chunk, this.pointer);
    return this.pointer;
  }
}

/** llhttp's reason for the error it stopped on (a C string in its memory). */
function errorReason(llhttp: LlhttpExports, parser: number, otherwise: string): string {
  const pointer = llhttp.llhttp_get_error_reason(parser);
  if (!pointer) return otherwise;
  const memory = new Uint8Array(llhttp.memory.buffer);
  let end = pointer;
  while (end < memory.length && memory[end] !== 0) end++;
  return Buffer.from(memory.subarray(pointer, end)).toString('latin1');
}
