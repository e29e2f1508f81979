import { createRequire } from 'node:module';

/**
 * llhttp, the HTTP/1 parser of Node and undici, in the WebAssembly build undici ships
 * (lib/llhttp/, not an export of its package: undici's version is pinned in package.json, and the
 * parsers' tests fail at once if a release moves the file). The upstream client reads responses
 * with it (gateway/upstream-pool.ts) and the request front reads request heads (http/front/).
 *
 * An instance's callbacks are its imports, fixed when it is made, so each user keeps one instance
 * and notes, while `llhttp_execute` runs, which parser and which chunk the callbacks belong to.
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
export function instantiateLlhttp(callbacks: LlhttpCallbacks): LlhttpExports {
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

/** Where chunks are copied in an instance's memory for llhttp_execute (one per instance). */
export class LlhttpInput {
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
export function errorReason(llhttp: LlhttpExports, parser: number, otherwise: string): string {
  const pointer = llhttp.llhttp_get_error_reason(parser);
  if (!pointer) return otherwise;
  const memory = new Uint8Array(llhttp.memory.buffer);
  let end = pointer;
  while (end < memory.length && memory[end] !== 0) end++;
  return Buffer.from(memory.subarray(pointer, end)).toString('latin1');
}
