// Keyed random draws: a value is a pure function of its key (seed, iteration, stage,
// event, microbatch, chunk), not the next element of a stream. So every policy faces
// the same realized durations for a seed, whatever order it asks for them in.
//
// The key's words go through MurmurHash3's 32-bit block mix and finalizer, once per
// salt; three salted hashes give a 53-bit and a 32-bit uniform, and Box–Muller turns
// them into one standard normal. Not cryptographic; not for anything but emulation.

import { xorShiftMultiply } from './seeded-init';

/** A task, a message, or (rank-send-*) a TP rank's own part of a message delay its group shares. */
export type DrawEvent =
  'F' | 'B' | 'W' | 'send-activation' | 'send-gradient' | 'rank-send-activation' | 'rank-send-gradient';

const EVENT_CODE: Record<DrawEvent, number> = {
  F: 1,
  B: 2,
  W: 3,
  'send-activation': 4,
  'send-gradient': 5,
  'rank-send-activation': 6,
  'rank-send-gradient': 7,
};

export interface DrawKey {
  readonly seed: number;
  readonly iteration: number;
  readonly stage: number;
  readonly event: DrawEvent;
  readonly mb: number;
  readonly chunk: number;
}

export class DrawKeyError extends Error {
  override name = 'DrawKeyError';
}

const TWO32 = 4294967296;

function mixWord(h: number, k: number): number {
  k = Math.imul(k, 0xcc9e2d51);
  k = (k << 15) | (k >>> 17);
  k = Math.imul(k, 0x1b873593);
  h ^= k;
  h = (h << 13) | (h >>> 19);
  return (Math.imul(h, 5) + 0xe6546b64) | 0;
}

/** MurmurHash3's fmix32, after mixing in the length. */
function finalize(h: number, words: number): number {
  return xorShiftMultiply(h ^ (words * 4), 0x85ebca6b, 13, 0xc2b2ae35);
}

function checkKey(key: DrawKey): number {
  const { seed, iteration, stage, mb, chunk, event } = key;
  if (!Number.isSafeInteger(seed))
    throw new DrawKeyError(`draw key seed must be a safe integer, got ${JSON.stringify(seed)}`);
  for (const [what, v] of [
    ['iteration', iteration],
    ['stage', stage],
    ['mb', mb],
    ['chunk', chunk],
  ] as const)
    if ((v | 0) !== v) throw new DrawKeyError(`draw key ${what} must be a 32-bit integer, got ${JSON.stringify(v)}`);
  const code = EVENT_CODE[event];
  if (typeof code !== 'number')
    throw new DrawKeyError(
      `draw key event must be one of ${Object.keys(EVENT_CODE).join(', ')}, got ${JSON.stringify(event)}`,
    );
  return code;
}

const isKeyFast = (key: DrawKey) =>
  Number.isSafeInteger(key.seed) &&
  (key.iteration | 0) === key.iteration &&
  (key.stage | 0) === key.stage &&
  (key.mb | 0) === key.mb &&
  (key.chunk | 0) === key.chunk &&
  typeof EVENT_CODE[key.event] === 'number';

function hashWords(
  salt: number,
  lo: number,
  hi: number,
  iteration: number,
  stage: number,
  code: number,
  mb: number,
  chunk: number,
): number {
  let h = salt | 0;
  h = mixWord(h, lo);
  h = mixWord(h, hi);
  h = mixWord(h, iteration);
  h = mixWord(h, stage);
  h = mixWord(h, code);
  h = mixWord(h, mb);
  h = mixWord(h, chunk);
  return finalize(h, 7);
}

const SALTS = [0x2545f491, 0x9e3779b9 | 0, 0x6a09e667] as const;

function hashes(key: DrawKey, salts: readonly number[]): number[] {
  const code = isKeyFast(key) ? EVENT_CODE[key.event] : checkKey(key);
  const { seed } = key;
  const lo = (((seed % TWO32) + TWO32) % TWO32) | 0;
  const hi = Math.floor(seed / TWO32) | 0;
  return salts.map((salt) =>
    hashWords(salt, lo, hi, key.iteration | 0, key.stage | 0, code, key.mb | 0, key.chunk | 0),
  );
}

/** A 32-bit hash of the key under `salt`: MurmurHash3 over the words (seed low, seed high, iteration, stage, event, mb, chunk). */
export function keyHash(key: DrawKey, salt: number): number {
  return hashes(key, [salt])[0];
}

/** One standard normal draw determined by the key. */
export function keyedNormal(key: DrawKey): number {
  const [a, b, c] = hashes(key, SALTS);
  // u1 in (0, 1) with 53 bits so the tails reach |z| ~ 8.6; u2 in [0, 1).
  const u1 = ((a >>> 11) * TWO32 + b + 0.5) / 9007199254740992;
  const u2 = c / TWO32;
  return Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
}
