// Seeded random numbers for deterministic weights and data, independent of tf's own
// random state. A parameter's initial values depend only on (seed, parameter name), so
// a stage built alone on one node gets exactly the weights the same layers have in the
// whole model built elsewhere.
//
// Not modelled: cryptographic quality. The generator is a 32-bit mixing PRNG that is
// fast and well distributed, which is all initialisation and batching need.

/** FNV-1a over the string, then a final avalanche: a 32-bit key for a name. */
export function hashString(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return avalanche(h);
}

/** Mixes a list of integers (seed, iteration, microbatch, ...) into one 32-bit key. */
export function mixKeys(...keys: number[]): number {
  let h = 0x9e3779b9;
  for (const k of keys) {
    if (!Number.isSafeInteger(k)) throw new RangeError(`mixKeys: key ${k} is not a safe integer`);
    // Fold in both 32-bit halves so keys above 2^32 still differ.
    h = avalanche(h ^ (k >>> 0));
    h = avalanche(h ^ Math.floor(k / 4294967296));
  }
  return h;
}

/**
 * The xor-shift-multiply finalizer shape both hashes use: x ^= x>>>16; x *= m1; x ^= x>>>shift;
 * x *= m2; x ^= x>>>16, as an unsigned 32-bit value. Its constants pick the mixer.
 */
export function xorShiftMultiply(x: number, m1: number, shift: number, m2: number): number {
  x ^= x >>> 16;
  x = Math.imul(x, m1);
  x ^= x >>> shift;
  x = Math.imul(x, m2);
  x ^= x >>> 16;
  return x >>> 0;
}

/** lowbias32's constants. */
const avalanche = (x: number) => xorShiftMultiply(x, 0x7feb352d, 15, 0x846ca68b);

/** A small counter-based generator: state advances by a Weyl step, output is mixed. */
export class SeededRandom {
  private state: number;
  private spareNormal: number | null = null;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** Uniform 32-bit unsigned integer. */
  nextUint32(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let z = this.state;
    z = Math.imul(z ^ (z >>> 15), z | 1);
    z ^= z + Math.imul(z ^ (z >>> 7), z | 61);
    return (z ^ (z >>> 14)) >>> 0;
  }

  /** Uniform in [0, 1). */
  next(): number {
    return this.nextUint32() / 4294967296;
  }

  /** Uniform integer in [0, n). */
  int(n: number): number {
    if (!(n >= 1) || !Number.isInteger(n))
      throw new RangeError(`SeededRandom.int: bound ${n} must be a positive integer`);
    return Math.floor(this.next() * n);
  }

  /** Standard normal by Box-Muller (pairs; the second value is kept for the next call). */
  normal(): number {
    if (this.spareNormal !== null) {
      const v = this.spareNormal;
      this.spareNormal = null;
      return v;
    }
    let u = this.next();
    while (u <= 0) u = this.next();
    const v = this.next();
    const r = Math.sqrt(-2 * Math.log(u));
    this.spareNormal = r * Math.sin(2 * Math.PI * v);
    return r * Math.cos(2 * Math.PI * v);
  }
}

/** Values for one parameter, keyed by (seed, name). */
export type InitKind = { kind: 'normal'; std: number } | { kind: 'constant'; value: number };

export function initValues(seed: number, name: string, size: number, init: InitKind): Float32Array {
  const out = new Float32Array(size);
  if (init.kind === 'constant') {
    out.fill(init.value);
    return out;
  }
  const rng = new SeededRandom(mixKeys(seed, hashString(name)));
  for (let i = 0; i < size; i++) out[i] = rng.normal() * init.std;
  return out;
}
