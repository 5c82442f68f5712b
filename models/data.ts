// Character-level datasets: a text file (any) or a synthetic English-like corpus made
// from a small grammar, a sorted character vocabulary, a 90/10 train/validation split,
// and batches that depend only on (seed, iteration, microbatch), so every node of a
// pipeline (and every rerun) sees the same data for the same microbatch.
//
// Not modelled: tokenisers other than characters, shuffling epochs (batches are sampled
// with replacement from random offsets).

import * as tf from '@tensorflow/tfjs';
import { mixKeys, SeededRandom } from './seeded-init';
import { RegularFileError, readRegularFile } from '../base/regular-file';
import { InputError } from '../base/errors';

export class CorpusError extends InputError {
  override name = 'CorpusError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

export type Split = 'train' | 'val';

/** Plain arrays (no tensors) so a batch can cross the bus; see toTensors. */
export interface Batch {
  readonly inputs: Int32Array;
  readonly targets: Int32Array;
  /** (B, T) for sequences, (B, W) for windows. */
  readonly inputShape: readonly number[];
  /** (B, T) for sequences, (B) for windows. */
  readonly targetShape: readonly number[];
}

export const TRAIN_FRACTION = 0.9;

export class Corpus {
  readonly vocab: readonly string[];
  readonly train: Int32Array;
  readonly val: Int32Array;
  private readonly index: Map<string, number>;

  constructor(
    readonly source: string,
    readonly text: string,
  ) {
    const chars = Array.from(text);
    if (chars.length === 0) throw new CorpusError(`${source}: corpus is empty`);
    this.vocab = [...new Set(chars)].sort((a, b) => a.codePointAt(0)! - b.codePointAt(0)!);
    this.index = new Map(this.vocab.map((c, i) => [c, i]));
    const ids = this.encode(text);
    const cut = Math.floor(ids.length * TRAIN_FRACTION);
    this.train = ids.subarray(0, cut);
    this.val = ids.subarray(cut);
  }

  get vocabSize(): number {
    return this.vocab.length;
  }

  encode(s: string): Int32Array {
    const chars = Array.from(s);
    const out = new Int32Array(chars.length);
    chars.forEach((c, i) => {
      const id = this.index.get(c);
      if (id === undefined)
        throw new CorpusError(`${this.source}: character ${JSON.stringify(c)} (at ${i}) is not in the vocabulary`);
      out[i] = id;
    });
    return out;
  }

  decode(ids: ArrayLike<number>): string {
    let s = '';
    for (let i = 0; i < ids.length; i++) {
      const c = this.vocab[ids[i]!];
      if (c === undefined)
        throw new CorpusError(
          `${this.source}: id ${ids[i]} (at ${i}) is outside the vocabulary of ${this.vocab.length}`,
        );
      s += c;
    }
    return s;
  }

  /** Refuse, before any training starts, a corpus too short for one sample of `seq` ids (and their targets) in either split. */
  checkFits(seq: number): void {
    this.splitData('train', seq + 1);
    this.splitData('val', seq + 1);
  }

  private splitData(split: Split, need: number): Int32Array {
    const data = split === 'train' ? this.train : this.val;
    if (data.length < need) {
      throw new CorpusError(`${this.source}: the ${split} split has ${data.length} characters, a sample needs ${need}`);
    }
    return data;
  }

  /** B sequences of T ids and their next-character targets, both (B, T). */
  batch(split: Split, seed: number, iteration: number, microbatch: number, batchSize: number, seq: number): Batch {
    const data = this.splitData(split, seq + 1);
    const rng = new SeededRandom(mixKeys(seed, iteration, microbatch, split === 'train' ? 0 : 1));
    const inputs = new Int32Array(batchSize * seq);
    const targets = new Int32Array(batchSize * seq);
    for (let b = 0; b < batchSize; b++) {
      const o = rng.int(data.length - seq);
      inputs.set(data.subarray(o, o + seq), b * seq);
      targets.set(data.subarray(o + 1, o + seq + 1), b * seq);
    }
    return { inputs, targets, inputShape: [batchSize, seq], targetShape: [batchSize, seq] };
  }

  /** B windows of the W previous ids (B, W) and the next id (B), for the MLP LM. */
  windowBatch(
    split: Split,
    seed: number,
    iteration: number,
    microbatch: number,
    batchSize: number,
    window: number,
  ): Batch {
    const data = this.splitData(split, window + 1);
    const rng = new SeededRandom(mixKeys(seed, iteration, microbatch, split === 'train' ? 2 : 3));
    const inputs = new Int32Array(batchSize * window);
    const targets = new Int32Array(batchSize);
    for (let b = 0; b < batchSize; b++) {
      const p = window + rng.int(data.length - window);
      inputs.set(data.subarray(p - window, p), b * window);
      targets[b] = data[p]!;
    }
    return { inputs, targets, inputShape: [batchSize, window], targetShape: [batchSize] };
  }
}

/** int32 tensors of a batch (the caller disposes them). */
export function toTensors(b: Batch): { inputs: tf.Tensor; targets: tf.Tensor } {
  return {
    inputs: tf.tensor(b.inputs, [...b.inputShape], 'int32'),
    targets: tf.tensor(b.targets, [...b.targetShape], 'int32'),
  };
}

/** The largest corpus file read, in bytes: its characters are held as one array while encoding. */
export const MAX_CORPUS_BYTES = 64 * 1024 * 1024;

/**
 * The text of a corpus file: a regular file (every stage process reads the same path, so
 * a pipe or a device, readable once or never ending, cannot serve), at most
 * MAX_CORPUS_BYTES, and UTF-8 (Baton trains on its characters).
 */
export function readCorpusText(file: string): string {
  const name = JSON.stringify(file);
  let bytes: Buffer;
  try {
    bytes = readRegularFile(file, MAX_CORPUS_BYTES);
  } catch (err) {
    if (!(err instanceof RegularFileError)) throw err;
    const hint =
      err.reason === 'not-regular'
        ? ' (every stage process reads the same path)'
        : err.reason === 'too-big'
          ? ' (64 MiB)'
          : '';
    throw new CorpusError(`corpus file ${name} ${err.message}${hint}`, { cause: err });
  }
  if (bytes.length === 0) throw new CorpusError(`corpus file ${name} is empty`);
  try {
    // ignoreBOM: a byte-order mark stays in the text, as it always has (the corpus digest covers it).
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    throw new CorpusError(
      `corpus file ${name} is not UTF-8 text at byte ${firstInvalidUtf8(bytes)}: Baton trains on the characters of a text file`,
    );
  }
}

/** Offset of the first byte sequence that is not well-formed UTF-8 (b.length if none). */
function firstInvalidUtf8(b: Uint8Array): number {
  let i = 0;
  while (i < b.length) {
    const c = b[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    // Lead byte: sequence length and the range of the second byte (no overlongs, no surrogates, ≤ U+10FFFF).
    let len: number,
      lo = 0x80,
      hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      if (c === 0xe0) lo = 0xa0;
      if (c === 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      if (c === 0xf0) lo = 0x90;
      if (c === 0xf4) hi = 0x8f;
    } else return i;
    if (i + len > b.length || b[i + 1] < lo || b[i + 1] > hi) return i;
    for (let k = 2; k < len; k++) if (b[i + k] < 0x80 || b[i + k] > 0xbf) return i;
    i += len;
  }
  return b.length;
}

/** Reads a text file; without a file, the synthetic corpus (seed 1). */
export function loadCorpus(file?: string): Corpus {
  if (file === undefined) return new Corpus('synthetic(seed 1)', syntheticText(1));
  return new Corpus(file, readCorpusText(file));
}

export function syntheticCorpus(seed: number, targetChars?: number): Corpus {
  return new Corpus(`synthetic(seed ${seed})`, syntheticText(seed, targetChars));
}

const WORDS = {
  adj: ['old', 'small', 'quiet', 'bright', 'cold', 'green', 'heavy', 'gentle', 'proud', 'strange', 'narrow', 'golden'],
  noun: [
    'fox',
    'river',
    'king',
    'garden',
    'lantern',
    'sailor',
    'mountain',
    'letter',
    'horse',
    'village',
    'window',
    'storm',
    'bridge',
    'candle',
  ],
  name: ['Anna', 'Tomas', 'Mira', 'Edgar', 'Lucia', 'Owen'],
  verbT: ['watched', 'carried', 'found', 'followed', 'painted', 'crossed', 'opened', 'remembered'],
  verbBase: ['watch', 'carry', 'find', 'follow', 'paint', 'cross', 'open', 'remember'],
  verbI: ['slept', 'waited', 'sang', 'wandered', 'laughed', 'trembled'],
  prep: ['over', 'under', 'near', 'behind', 'across', 'beside'],
  adv: ['slowly', 'softly', 'again', 'at dawn', 'in silence', 'by night'],
  time: ['In the morning', 'Long ago', 'That winter', 'At midnight', 'Before the rain'],
};

type WordClass = keyof typeof WORDS;

/** English-like text from a small grammar, about targetChars characters (default 100,000). */
export function syntheticText(seed: number, targetChars = 100_000): string {
  const rng = new SeededRandom(mixKeys(seed, 0x5e47));
  const pick = (k: WordClass) => WORDS[k][rng.int(WORDS[k].length)]!;
  const np = () => (rng.next() < 0.5 ? `the ${pick('adj')} ${pick('noun')}` : `the ${pick('noun')}`);
  const sentences: Array<() => string> = [
    () => `${np()} ${pick('verbT')} ${np()} ${pick('prep')} ${np()}.`,
    () => `${pick('name')} ${pick('verbI')} ${pick('adv')}.`,
    () => `${pick('time')}, ${pick('name')} ${pick('verbT')} ${np()}.`,
    () => `${pick('name')} said that ${np()} was ${pick('adj')}.`,
    () => `Why did ${np()} ${pick('verbBase')} ${np()}?`,
    () => `${np()} ${pick('verbI')} ${pick('prep')} ${np()}, and ${pick('name')} ${pick('verbI')}.`,
  ];
  const parts: string[] = [];
  let length = 0;
  while (length < targetChars) {
    const count = 2 + rng.int(4);
    const para: string[] = [];
    for (let i = 0; i < count; i++) {
      const s = sentences[rng.int(sentences.length)]!();
      para.push(s.charAt(0).toUpperCase() + s.slice(1));
    }
    const text = para.join(' ') + '\n';
    parts.push(text);
    length += text.length;
  }
  return parts.join('');
}
