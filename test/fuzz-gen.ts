// Inputs for the fuzz tests: a seeded random source, random CBOR items written byte by
// byte (so anything a peer could send is reachable: non-minimal heads, indefinite
// lengths, stray breaks, every tag Baton's decoder knows and some it does not), and
// mutations of valid messages, at the byte level and at the level of their decoded
// values (numbers <-> strings <-> arrays <-> maps, NaN, -0, huge integers, wrong
// typed arrays, prototype keys, deep nesting, long strings).
//
// The test files run a few thousand cases; FUZZ_SEED and FUZZ_SCALE (a multiplier of
// the case counts) run bigger campaigns locally.

import { decodeValue, encodeValue, joinParts } from '../transport/codec';

export const FUZZ_SEED = Number(process.env.FUZZ_SEED ?? 20261) >>> 0;
export const FUZZ_SCALE = Math.max(0, Number(process.env.FUZZ_SCALE ?? 1));

/** A case count for a test: `n` times FUZZ_SCALE. */
export const cases = (n: number): number => Math.max(1, Math.round(n * FUZZ_SCALE));

/** sfc32: a fast, seedable, reproducible 32-bit generator. */
export class Rng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;
  constructor(seed: number) {
    this.a = 0x9e3779b9;
    this.b = 0x243f6a88;
    this.c = 0xb7e15162;
    this.d = seed >>> 0;
    for (let i = 0; i < 16; i++) this.u32();
  }
  u32(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return t >>> 0;
  }
  /** An integer in [0, n). */
  int(n: number): number {
    return n <= 1 ? 0 : this.u32() % n;
  }
  bool(p = 0.5): boolean {
    return this.u32() / 0x100000000 < p;
  }
  pick<T>(xs: readonly T[]): T {
    return xs[this.int(xs.length)];
  }
  bytes(n: number): Uint8Array {
    const b = new Uint8Array(n);
    for (let i = 0; i < n; i++) b[i] = this.u32() & 0xff;
    return b;
  }
}

// ---------- raw CBOR, byte by byte ----------

/** Tags Baton's decoder (cbor-x plus the codec's typed-array tags) gives meaning to, and a few it does not. */
const TAGS = [
  0, 1, 2, 3, 4, 5, 6, 14, 15, 21, 22, 23, 24, 25, 26, 27, 28, 29, 32, 35, 40, 51, 52, 55799, 64, 65, 66, 67, 68, 69,
  70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 105, 256, 258, 259, 0xdfff, 0xe000, 0xe001,
  0xdffe, 51111, 0xffff, 0x10000, 0xffffffff,
];

function head(out: number[], major: number, n: number, rng: Rng, minimal = !rng.bool(0.1)): void {
  const m = major << 5;
  const width = minimal
    ? n < 24
      ? 0
      : n < 0x100
        ? 1
        : n < 0x10000
          ? 2
          : n < 0x100000000
            ? 4
            : 8
    : rng.pick([1, 2, 4, 8].filter((w) => w === 8 || n < 2 ** (8 * w)));
  if (width === 0) {
    out.push(m | n);
    return;
  }
  out.push(m | (width === 1 ? 24 : width === 2 ? 25 : width === 4 ? 26 : 27));
  const hi = Math.floor(n / 0x100000000);
  for (let i = width - 1; i >= 0; i--) out.push(i >= 4 ? (hi >>> (8 * (i - 4))) & 0xff : (n >>> (8 * i)) & 0xff);
}

/** A count for a head: mostly small, sometimes absurd for the bytes that follow. */
function count(rng: Rng): number {
  switch (rng.int(10)) {
    case 0:
      return rng.pick([
        23,
        24,
        255,
        256,
        65535,
        65536,
        2 ** 31 - 1,
        2 ** 31,
        2 ** 32 - 1,
        2 ** 32,
        2 ** 53 - 1,
        2 ** 53 + 2,
        1e15,
      ]);
    case 1:
      return rng.int(1000);
    default:
      return rng.int(8);
  }
}

const KEYS = [
  'v',
  'job',
  'kind',
  'iteration',
  'mb',
  'chunk',
  'dir',
  'src',
  'dst',
  'seq',
  'sentAt',
  'commMs',
  'bytes',
  'tensors',
  'body',
  'launch',
  'dtype',
  'shape',
  'pad',
  'data',
  'verb',
  'events',
  'reply',
  'name',
  'config',
  'stages',
  'leaseMs',
  'token',
  'type',
  't',
  'stage',
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  'hasOwnProperty',
  'valueOf',
  'length',
];

function text(out: number[], s: string, rng: Rng): void {
  const b = Buffer.from(s);
  head(out, 3, b.length, rng);
  for (const x of b) out.push(x);
}

/** One random CBOR item (possibly malformed: absurd lengths, stray breaks, bad UTF-8) appended to `out`. */
export function rawItem(out: number[], rng: Rng, depth = 0): void {
  const leaf = depth > 6 || rng.bool(0.4);
  const kind = leaf
    ? rng.pick(['uint', 'nint', 'bstr', 'tstr', 'simple', 'float', 'key'])
    : rng.pick(['array', 'map', 'tag', 'tag', 'indef', 'deep', 'array', 'map']);
  switch (kind) {
    case 'uint':
      head(out, 0, rng.bool(0.2) ? rng.pick([2 ** 53, 2 ** 64 - 1, 2 ** 32, 2 ** 31]) : count(rng), rng);
      return;
    case 'nint':
      head(out, 1, rng.bool(0.2) ? rng.pick([2 ** 53, 2 ** 64 - 1, 2 ** 32]) : count(rng), rng);
      return;
    case 'bstr':
    case 'tstr': {
      const n = rng.bool(0.9) ? rng.int(40) : count(rng);
      head(out, kind === 'bstr' ? 2 : 3, n, rng);
      // Usually as many bytes as the head says; sometimes fewer (truncated).
      const have = n <= 4096 && rng.bool(0.9) ? n : Math.min(n, rng.int(64));
      for (let i = 0; i < have; i++) out.push(kind === 'tstr' && rng.bool(0.9) ? 0x61 + rng.int(26) : rng.int(256));
      return;
    }
    case 'key':
      text(out, rng.pick(KEYS), rng);
      return;
    case 'simple': {
      const r = rng.int(6);
      if (r === 0) out.push(0xf8, rng.int(256));
      else if (r === 1) out.push(0xe0 | rng.int(20));
      else if (r === 2)
        out.push(0xff); // a break outside an indefinite item
      else out.push(rng.pick([0xf4, 0xf5, 0xf6, 0xf7]));
      return;
    }
    case 'float': {
      const v = rng.pick([NaN, Infinity, -Infinity, -0, 0.5, 1e308, -1e308, 5e-324, 2 ** 53 + 1, 1.5, 2 ** 63]);
      const w = rng.pick([2, 4, 8]);
      if (w === 2) out.push(0xf9, rng.int(256), rng.int(256));
      else {
        const b = Buffer.alloc(w);
        if (w === 4) b.writeFloatBE(v);
        else b.writeDoubleBE(v);
        out.push(w === 4 ? 0xfa : 0xfb, ...b);
      }
      return;
    }
    case 'array':
    case 'map': {
      const n = rng.bool(0.95) ? rng.int(6) : count(rng);
      head(out, kind === 'array' ? 4 : 5, n, rng);
      const items = Math.min(n, 6) * (kind === 'map' ? 2 : 1);
      for (let i = 0; i < items; i++) {
        if (kind === 'map' && i % 2 === 0 && rng.bool(0.7)) text(out, rng.pick(KEYS), rng);
        else rawItem(out, rng, depth + 1);
      }
      return;
    }
    case 'indef': {
      const major = rng.pick([2, 3, 4, 5]);
      out.push((major << 5) | 31);
      const n = rng.int(4);
      for (let i = 0; i < n * (major === 5 ? 2 : 1); i++) {
        if (major === 2 || major === 3) {
          const len = rng.int(5);
          head(out, rng.bool(0.9) ? major : rng.pick([2, 3]), len, rng);
          for (let j = 0; j < len; j++) out.push(0x61 + rng.int(26));
        } else rawItem(out, rng, depth + 1);
      }
      if (rng.bool(0.9)) out.push(0xff);
      return;
    }
    case 'tag': {
      head(out, 6, rng.bool(0.9) ? rng.pick(TAGS) : count(rng), rng);
      rawItem(out, rng, depth + 1);
      return;
    }
    case 'deep': {
      const n = rng.pick([50, 500, 5000, 20000]);
      const opener = rng.pick([[0x81], [0xa1, 0x61, 0x61], [0xd8, 0x1c], [0xc6], [0x9f]]);
      for (let i = 0; i < n; i++) out.push(...opener);
      out.push(0xf6);
      return;
    }
  }
}

/** A whole message of random CBOR (sometimes followed by trailing bytes). */
export function randomCbor(rng: Rng): Uint8Array {
  const out: number[] = [];
  rawItem(out, rng);
  if (rng.bool(0.05)) rawItem(out, rng);
  return Uint8Array.from(out);
}

// ---------- byte-level mutations ----------

const INTERESTING_BYTES = [
  0x00, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1f, 0x3f, 0x40, 0x5f, 0x7f, 0x9f, 0xbf, 0xc0, 0xd8, 0xd9, 0xda, 0xdb, 0xf4,
  0xf6, 0xf7, 0xf9, 0xfa, 0xfb, 0xff,
];

export function mutateBytes(src: Uint8Array, rng: Rng): Uint8Array {
  let b: Uint8Array = Uint8Array.from(src);
  const rounds = 1 + rng.int(rng.bool(0.8) ? 2 : 8);
  for (let r = 0; r < rounds; r++) {
    const at = rng.int(b.length + 1);
    switch (rng.int(9)) {
      case 0:
        if (b.length) b[Math.min(at, b.length - 1)] ^= 1 << rng.int(8);
        break;
      case 1:
        if (b.length) b[Math.min(at, b.length - 1)] = rng.pick(INTERESTING_BYTES);
        break;
      case 2:
        if (b.length) b[Math.min(at, b.length - 1)] = rng.int(256);
        break;
      case 3:
        b = b.slice(0, rng.int(b.length + 1));
        break; // truncation
      case 4: {
        const extra = rng.bool() ? rng.bytes(1 + rng.int(16)) : randomCbor(rng);
        b = joinParts([b, extra]);
        break;
      } // extension
      case 5: {
        const ins = rng.bytes(1 + rng.int(4));
        b = joinParts([b.subarray(0, at), ins, b.subarray(at)]);
        break;
      }
      case 6: {
        const n = 1 + rng.int(8);
        b = joinParts([b.subarray(0, at), b.subarray(Math.min(b.length, at + n))]);
        break;
      } // deletion
      case 7: {
        // duplicate a chunk
        const s = rng.int(b.length + 1);
        const n = rng.int(32);
        b = joinParts([b.subarray(0, at), b.subarray(s, s + n), b.subarray(at)]);
        break;
      }
      case 8: {
        const item: number[] = [];
        rawItem(item, rng, 3);
        b = joinParts([b.subarray(0, at), Uint8Array.from(item), b.subarray(at)]);
        break;
      }
    }
  }
  return b;
}

// ---------- value-level mutations ----------

/** A map with an own property named `key` (even __proto__), as a peer's CBOR would have. */
function withOwn(o: Record<string, unknown>, key: string, value: unknown): Record<string, unknown> {
  Object.defineProperty(o, key, { value, enumerable: true, writable: true, configurable: true });
  return o;
}

function deep(rng: Rng, n: number): unknown {
  let x: unknown = rng.bool() ? 1 : 'x';
  for (let i = 0; i < n; i++) x = rng.bool() ? [x] : { a: x };
  return x;
}

/** A value of any type a peer could put where another was expected. */
export function oddValue(rng: Rng, depth = 0): unknown {
  switch (rng.int(24)) {
    case 0:
      return rng.pick([NaN, Infinity, -Infinity, -0]);
    case 1:
      return rng.pick([2 ** 53, 2 ** 53 + 2, -(2 ** 53) - 2, 1e308, -1e308, 5e-324, 2 ** 64, 1e21]);
    case 2:
      return rng.pick([-1, -2, -1000, -(2 ** 31)]);
    case 3:
      return rng.pick([0, 1, 2, 3, 7, 255, 65536, 2 ** 31, 2 ** 32]);
    case 4:
      return rng.pick([0.5, 1.5, -0.5, 3.14]);
    case 5:
      return rng.pick([
        '',
        '0',
        '1',
        '-1',
        'NaN',
        'forward',
        'activation',
        'gradient',
        'control',
        'data',
        'report',
        'start',
        'float32',
        'j',
        'a.b',
        ' ',
        '\u0000',
        '\u2028',
      ]);
    case 6:
      return 'x'.repeat(rng.pick([200, 5000, 100_000]));
    case 7:
      return rng.pick([true, false, null, undefined]);
    case 8:
      return [];
    case 9:
      return depth > 3 ? [] : Array.from({ length: 1 + rng.int(4) }, () => oddValue(rng, depth + 1));
    case 10:
      return {};
    case 11:
      return depth > 3 ? {} : { [rng.pick(KEYS)]: oddValue(rng, depth + 1) };
    case 12:
      return withOwn(
        {},
        rng.pick(['__proto__', 'constructor', 'prototype']),
        depth > 3 ? { polluted: 1 } : oddValue(rng, depth + 1),
      );
    case 13:
      return new (rng.pick([
        Float32Array,
        Float64Array,
        Int32Array,
        Int16Array,
        Int8Array,
        Uint32Array,
        Uint16Array,
        Uint8Array,
        Uint8ClampedArray,
        BigInt64Array as unknown as Float32ArrayConstructor,
      ]))(rng.int(5));
    case 14:
      return Buffer.from(rng.bytes(rng.int(9)));
    case 15:
      return rng.pick([BigInt(1), BigInt(2) ** BigInt(70), -(BigInt(2) ** BigInt(64))]);
    case 16:
      return deep(rng, rng.pick([20, 200, 2000]));
    case 17:
      return new Date(rng.pick([0, NaN, 8.64e15]));
    case 18:
      return new Set([1, 2]);
    case 19:
      return new Map([[1, 2]]);
    case 20:
      return Array.from({ length: rng.pick([1000, 20_000]) }, (_, i) => i);
    case 21:
      return Object.fromEntries(Array.from({ length: rng.pick([100, 5000]) }, (_, i) => [`k${i}`, i]));
    case 22:
      return rng.pick([/a+$/, new Error('peer')]);
    default:
      return rng.int(10);
  }
}

type Path = (string | number)[];

function paths(x: unknown, at: Path = [], out: Path[] = [], depth = 0): Path[] {
  out.push(at);
  if (depth > 6 || x === null || typeof x !== 'object' || ArrayBuffer.isView(x)) return out;
  if (Array.isArray(x)) x.slice(0, 16).forEach((v, i) => paths(v, [...at, i], out, depth + 1));
  else
    for (const k of Object.keys(x).slice(0, 32)) paths((x as Record<string, unknown>)[k], [...at, k], out, depth + 1);
  return out;
}

function clone(x: unknown): unknown {
  if (x === null || typeof x !== 'object') return x;
  if (ArrayBuffer.isView(x)) return x;
  if (Array.isArray(x)) return x.map(clone);
  const o: Record<string, unknown> = {};
  for (const k of Object.keys(x)) withOwn(o, k, clone((x as Record<string, unknown>)[k]));
  return o;
}

function typeSwap(x: unknown, rng: Rng): unknown {
  if (typeof x === 'number')
    return rng.pick([
      String(x),
      [x],
      { v: x },
      x + 0.5,
      -x - 1,
      x * 2 ** 40,
      NaN,
      -0,
      BigInt(Number.isFinite(x) ? Math.trunc(x) : 0),
    ]);
  if (typeof x === 'string')
    return rng.pick([Number(x), x.length, [x], { [x]: x }, x + '.x', x.toUpperCase(), x.slice(1), Buffer.from(x)]);
  if (Array.isArray(x))
    return rng.pick([
      x.length,
      { ...x },
      x.slice(1),
      [...x, ...x],
      [x],
      x.map((y) => (y !== null && typeof y === 'object' ? 'o' : String(y))),
    ]);
  if (ArrayBuffer.isView(x))
    return rng.pick([
      Array.from(x as Float32Array).slice(0, 8),
      new Float64Array(4),
      new Uint8Array(x.buffer, x.byteOffset, x.byteLength),
      new Int8Array(3),
      'data',
      null,
    ]);
  if (x !== null && typeof x === 'object')
    return rng.pick([Object.values(x), Object.keys(x), JSON.stringify(Object.keys(x)), 0]);
  return oddValue(rng);
}

/** A mutation of a decoded message (maps as plain objects), re-encoded with the project's encoder. */
export function mutateValue(root: unknown, rng: Rng): Uint8Array {
  let v = clone(root);
  const rounds = 1 + rng.int(3);
  for (let r = 0; r < rounds; r++) {
    const all = paths(v);
    const p = rng.pick(all);
    const get = (x: unknown, q: Path) => q.reduce<unknown>((o, k) => (o as Record<string | number, unknown>)?.[k], x);
    const cur = get(v, p);
    const op = rng.int(6);
    if (op === 0 && cur !== null && typeof cur === 'object' && !Array.isArray(cur) && !ArrayBuffer.isView(cur)) {
      // add a key (a known one, or a prototype key)
      withOwn(cur as Record<string, unknown>, rng.pick(KEYS), oddValue(rng));
      continue;
    }
    if (op === 1 && p.length > 0) {
      // delete
      const parent = get(v, p.slice(0, -1));
      const k = p[p.length - 1];
      if (Array.isArray(parent)) parent.splice(k as number, 1);
      else if (parent && typeof parent === 'object') delete (parent as Record<string, unknown>)[k];
      continue;
    }
    const next: unknown = op <= 3 ? typeSwap(cur, rng) : oddValue(rng);
    if (p.length === 0) v = next;
    else {
      const parent = get(v, p.slice(0, -1));
      if (Array.isArray(parent)) parent[p[p.length - 1] as number] = next;
      else if (parent && typeof parent === 'object')
        withOwn(parent as Record<string, unknown>, String(p[p.length - 1]), next);
    }
  }
  try {
    return encodeValue(v);
  } catch {
    return encodeValue(null);
  }
}

/** A malformed variant of a valid message: byte mutations, value mutations, or random CBOR. */
export function malformed(valid: Uint8Array, rng: Rng): Uint8Array {
  const r = rng.int(10);
  if (r < 5) return mutateBytes(valid, rng);
  if (r < 9) {
    let v: unknown;
    try {
      v = decodeValue(valid);
    } catch {
      return mutateBytes(valid, rng);
    }
    return mutateValue(v, rng);
  }
  return randomCbor(rng);
}
