// The wasm heap guard: the wasm heap is 4 GiB, never shrinks and silently corrupts data
// near 3.9 GiB of live tensors (a failed malloc returns 0 and the backend writes the
// tensor at address 0, over other tensors), so stages check the live bytes after each
// task, and every tensor allocation is refused with WasmHeapError before it would pass
// the guard or when malloc fails, inside a task as well, before anything is written.

import * as tf from '@tensorflow/tfjs';

interface WasmModuleLike {
  _malloc(bytes: number): number;
  _free(at: number): void;
}

let allocationLimit = 0;
/** The module whose malloc is wrapped. */
let guarded: WasmModuleLike | null = null;

/**
 * Wraps the initialized wasm backend's malloc so no tensor allocation passes `limitBytes`
 * of live tensors or lands at address 0. Idempotent; throws when the backend is not ready.
 */
export function installWasmAllocationGuard(limitBytes: number = allocationLimit || DEFAULT_WASM_HEAP_LIMIT): void {
  allocationLimit = limitBytes;
  const wasm = (tf.findBackend('wasm') as unknown as { wasm?: WasmModuleLike } | null)?.wasm;
  if (!wasm || typeof wasm._malloc !== 'function' || typeof wasm._free !== 'function')
    throw new Error('tfjs-fixes: the wasm backend is not initialized (no _malloc to guard)');
  // A backend that was removed and made again has a module of its own.
  if (guarded === wasm) return;
  // Emscripten binds _malloc lazily: its first call replaces Module._malloc with the raw
  // export, which would replace this wrapper too. Make that first call now.
  wasm._free(wasm._malloc(8));
  const malloc = wasm._malloc.bind(wasm);
  guarded = wasm;
  wasm._malloc = (bytes: number): number => {
    const live = liveBytes();
    if (bytes > 0 && live + bytes > allocationLimit)
      throw new WasmHeapError(`allocating a tensor of ${bytes} bytes`, live + bytes, allocationLimit);
    const at = malloc(bytes);
    if (bytes > 0 && at === 0)
      throw new WasmHeapError(`allocating a tensor of ${bytes} bytes (malloc failed)`, live + bytes, allocationLimit);
    return at;
  };
}

function liveBytes(): number {
  return (tf.engine() as unknown as { state: { numBytes: number } }).state.numBytes;
}

/** The live-tensor bytes past which a tensor allocation on wasm is refused (tests lower it). */
export function setWasmAllocationLimit(limitBytes: number = DEFAULT_WASM_HEAP_LIMIT): void {
  allocationLimit = limitBytes;
}

export const DEFAULT_WASM_HEAP_LIMIT = 3.5 * 1024 ** 3;

export class WasmHeapError extends Error {
  override name = 'WasmHeapError';
  constructor(
    readonly where: string,
    readonly liveBytes: number,
    readonly limitBytes: number,
  ) {
    super(
      `${where}: ${(liveBytes / 1024 ** 3).toFixed(3)} GiB of live tensors on the wasm backend is past the ` +
        `${(limitBytes / 1024 ** 3).toFixed(3)} GiB guard (the 4 GiB heap corrupts data near 3.9 GiB); ` +
        `use fewer or smaller microbatches in flight, or dispose tensors`,
    );
  }
}

/**
 * Throws WasmHeapError when the wasm backend holds more than limitBytes of live tensors.
 * Does nothing on other backends. Returns the live byte count.
 */
export function checkWasmHeap(limitBytes: number = DEFAULT_WASM_HEAP_LIMIT, where = 'wasm heap check'): number {
  const live = tf.memory().numBytes;
  if (tf.getBackend() === 'wasm' && live > limitBytes) throw new WasmHeapError(where, live, limitBytes);
  return live;
}
