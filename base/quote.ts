// Quoting values in messages: a peer's value never reaches an error message or a log
// unbounded, and printing one never throws.

/** A map made by a literal or by a decoder (prototype Object or null), not an instance of a class. */
export function isPlainObject(x: unknown): x is Record<string, unknown> {
  if (x === null || typeof x !== 'object' || Array.isArray(x)) return false;
  const p = Object.getPrototypeOf(x);
  return p === Object.prototype || p === null;
}

/** A peer's value in a message of ours: a string as it is (cut to `max`), anything else quoted. */
export function peerText(x: unknown, max = 200): string {
  return typeof x === 'string' ? x.slice(0, max) : quoteValue(x);
}

/**
 * A short quote of a bad value for error messages. Never throws, and never renders more
 * than it shows: a peer's 50 MB string or million-element list is cut before quoting, and
 * nesting is shown QUOTE_DEPTH levels deep, since a peer's value may hold itself (CBOR tags
 * 28/29), which a quote that followed it would never finish.
 */
export function quoteValue(x: unknown, max = 80): string {
  return quote(x, max, 0);
}

const QUOTE_DEPTH = 3;

function quote(x: unknown, max: number, depth: number): string {
  try {
    if (x === undefined) return 'undefined';
    if (typeof x === 'number' || typeof x === 'bigint' || typeof x === 'boolean' || x === null) return String(x);
    if (typeof x === 'string') return cut(JSON.stringify(x.length > max ? x.slice(0, max) : x), max);
    if (ArrayBuffer.isView(x)) return `${x.constructor.name}(${x.byteLength} bytes)`;
    if (Array.isArray(x)) {
      if (depth >= QUOTE_DEPTH) return x.length === 0 ? '[]' : '[…]';
      const shown = x.slice(0, 8).map((v) => quote(v, 20, depth + 1));
      return cut(`[${shown.join(',')}${x.length > 8 ? `,… ${x.length} items` : ''}]`, max);
    }
    if (typeof x === 'object' && !isPlainObject(x)) return `a ${String(x.constructor?.name ?? 'object')}`;
    if (typeof x === 'object') {
      const keys = Object.keys(x);
      if (depth >= QUOTE_DEPTH) return keys.length === 0 ? '{}' : '{…}';
      const shown = keys
        .slice(0, 6)
        .map((k) => `${quote(k, 20, depth + 1)}:${quote((x as Record<string, unknown>)[k], 20, depth + 1)}`);
      return cut(`{${shown.join(',')}${keys.length > 6 ? `,… ${keys.length} keys` : ''}}`, max);
    }
    return typeof x;
  } catch {
    return 'an unprintable value';
  }
}

function cut(s: string, max: number): string {
  return s.length > max ? `${s.slice(0, max - 3)}...` : s;
}
