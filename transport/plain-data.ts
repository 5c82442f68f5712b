// What counts as plain data in a peer's message (plainDataProblem): what decodeValue
// takes and what an envelope's body may hold. It checks the decoded value; it does not decode.

import { isPlainObject, quoteValue } from '../base/quote';
import { TENSOR_CTORS } from './cbor-tensors';

/** How deep plain data may nest: Baton's own messages nest a few levels, and what walks a
 * peer's value recursively later (JSON output, re-encoding) must not run out of stack. */
export const MAX_NESTING = 64;

/**
 * What makes `root` other than plain data, or null. Plain data is what Baton's messages hold:
 * null, undefined, booleans, numbers, strings, arrays, plain maps and the tensor typed arrays
 * (and Buffers), as a tree at most MAX_NESTING deep. Tags make cbor-x build dates, big
 * integers, sets, maps, regular expressions, errors, unknown-tag wrappers and shared or
 * cyclic references from a peer's bytes.
 */
export function plainDataProblem(root: unknown): string | null {
  const seen = new Set<object>();
  const todo: unknown[] = [root];
  const depths: number[] = [0];
  while (todo.length > 0) {
    const x = todo.pop();
    const depth = depths.pop()!;
    if (x === null || x === undefined || typeof x === 'boolean' || typeof x === 'number' || typeof x === 'string')
      continue;
    if (typeof x !== 'object') return `a ${typeof x}`;
    if (seen.has(x)) return 'a shared or cyclic reference';
    seen.add(x);
    const nested = Array.isArray(x) || isPlainObject(x);
    if (nested && depth >= MAX_NESTING) return `lists or maps nested over ${MAX_NESTING} deep`;
    if (Array.isArray(x))
      for (let i = 0; i < x.length; i++) {
        todo.push(x[i]);
        depths.push(depth + 1);
      }
    else if (ArrayBuffer.isView(x)) {
      if (!(x instanceof Uint8Array) && !TENSOR_CTORS.has(x.constructor)) return `a ${x.constructor.name}`;
    } else if (isPlainObject(x))
      for (const k in x) {
        todo.push(x[k]);
        depths.push(depth + 1);
      }
    else return quoteValue(x);
  }
  return null;
}
