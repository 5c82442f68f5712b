import * as assert from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { loadBackend } from '../models/backend';
import {
  Corpus,
  CorpusError,
  MAX_CORPUS_BYTES,
  loadCorpus,
  syntheticCorpus,
  syntheticText,
  toTensors,
} from '../models/data';
import { execFileSync } from 'child_process';
import { RegularFileError, readRegularFile } from '../base/regular-file';

describe('data: corpora and batches', () => {
  const corpus = loadCorpus();
  before(async () => {
    await loadBackend({ force: 'cpu' });
  });

  it('without a file, makes a ~100 KB English-like synthetic corpus', () => {
    assert.ok(corpus.text.length >= 100_000 && corpus.text.length < 101_000, `length ${corpus.text.length}`);
    assert.match(corpus.source, /synthetic/);
    const words = corpus.text.split(/[\s,.?]+/).filter(Boolean);
    assert.ok(new Set(words).size > 50, 'a real vocabulary of words');
    assert.match(corpus.text, /^[A-Z][a-z]+ /, 'starts with a capitalised word');
    assert.ok(corpus.text.includes('\n'), 'has paragraphs');
  });

  it('the synthetic corpus is a pure function of its seed', () => {
    assert.strictEqual(syntheticText(5), syntheticText(5));
    assert.notStrictEqual(syntheticText(5), syntheticText(6));
    assert.strictEqual(syntheticText(1), corpus.text);
  });

  it('has a sorted character vocabulary and encodes and decodes losslessly', () => {
    const sorted = [...corpus.vocab].sort((a, b) => a.codePointAt(0)! - b.codePointAt(0)!);
    assert.deepStrictEqual(corpus.vocab, sorted);
    assert.strictEqual(new Set(corpus.vocab).size, corpus.vocab.length);
    const sample = corpus.text.slice(1000, 1200);
    assert.strictEqual(corpus.decode(corpus.encode(sample)), sample);
    assert.throws(
      () => corpus.encode('~'),
      (e: Error) => e instanceof CorpusError && /character "~" \(at 0\) is not in the vocabulary/.test(e.message),
    );
  });

  it('splits 90/10 into train and validation in text order', () => {
    const n = Array.from(corpus.text).length;
    assert.strictEqual(corpus.train.length, Math.floor(n * 0.9));
    assert.strictEqual(corpus.train.length + corpus.val.length, n);
    assert.strictEqual(
      corpus.decode(corpus.val.slice(0, 50)),
      corpus.text.slice(corpus.train.length, corpus.train.length + 50),
    );
  });

  it('a batch depends only on (seed, iteration, microbatch)', () => {
    const a = corpus.batch('train', 7, 3, 2, 4, 16);
    const b = syntheticCorpus(1).batch('train', 7, 3, 2, 4, 16);
    assert.deepStrictEqual(a, b);
    assert.notDeepStrictEqual(corpus.batch('train', 7, 3, 1, 4, 16).inputs, a.inputs, 'another microbatch differs');
    assert.notDeepStrictEqual(corpus.batch('train', 7, 4, 2, 4, 16).inputs, a.inputs, 'another iteration differs');
    assert.notDeepStrictEqual(corpus.batch('train', 8, 3, 2, 4, 16).inputs, a.inputs, 'another seed differs');
  });

  it('sequence targets are the inputs shifted by one character of the split', () => {
    const b = corpus.batch('val', 1, 0, 0, 3, 20);
    assert.deepStrictEqual(b.inputShape, [3, 20]);
    assert.deepStrictEqual(b.targetShape, [3, 20]);
    const val = corpus.decode(corpus.val);
    for (let r = 0; r < 3; r++) {
      const x = corpus.decode(b.inputs.subarray(r * 20, r * 20 + 20));
      const y = corpus.decode(b.targets.subarray(r * 20, r * 20 + 20));
      assert.strictEqual(x.slice(1), y.slice(0, -1));
      const at = val.indexOf(x + y.slice(-1));
      assert.ok(at >= 0, `row ${r} ${JSON.stringify(x)} is a contiguous piece of the validation text`);
    }
  });

  it('window batches give the W previous characters and the next one', () => {
    const b = corpus.windowBatch('train', 2, 1, 0, 5, 8);
    assert.deepStrictEqual(b.inputShape, [5, 8]);
    assert.deepStrictEqual(b.targetShape, [5]);
    const train = corpus.decode(corpus.train);
    for (let r = 0; r < 5; r++) {
      const ctx = corpus.decode(b.inputs.subarray(r * 8, r * 8 + 8));
      assert.ok(
        train.includes(ctx + corpus.vocab[b.targets[r]!]),
        `window ${JSON.stringify(ctx)} is followed by its target`,
      );
    }
    assert.deepStrictEqual(corpus.windowBatch('train', 2, 1, 0, 5, 8), b);
  });

  it('converts a batch into int32 tensors of its shapes', () => {
    const t = toTensors(corpus.windowBatch('train', 2, 1, 0, 5, 8));
    assert.deepStrictEqual(
      [t.inputs.shape, t.inputs.dtype, t.targets.shape, t.targets.dtype],
      [[5, 8], 'int32', [5], 'int32'],
    );
    t.inputs.dispose();
    t.targets.dispose();
  });

  it('reads any text file, and says which file is missing or empty', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-data-'));
    try {
      const file = path.join(dir, 'tiny.txt');
      fs.writeFileSync(file, 'hello world, hello baton\n'.repeat(10));
      const c = loadCorpus(file);
      assert.deepStrictEqual(c.vocab, ['\n', ' ', ',', 'a', 'b', 'd', 'e', 'h', 'l', 'n', 'o', 'r', 't', 'w']);
      assert.strictEqual(c.source, file);
      const missing = path.join(dir, 'nope.txt');
      assert.throws(
        () => loadCorpus(missing),
        (e: Error) => e instanceof CorpusError && e.message.includes(`"${missing}" does not exist`),
      );
      const empty = path.join(dir, 'empty.txt');
      fs.writeFileSync(empty, '');
      assert.throws(() => loadCorpus(empty), /corpus file ".*empty\.txt" is empty/);
      assert.throws(() => c.batch('val', 1, 0, 0, 2, 100), /the val split has 25 characters, a sample needs 101/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('reads only a regular UTF-8 file, naming what else it got: a pipe, a device, a directory, bytes that are not UTF-8', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-data-'));
    try {
      const utf8 = path.join(dir, 'utf8.txt');
      fs.writeFileSync(utf8, 'héllo wörld 🎉\n');
      assert.equal(loadCorpus(utf8).text, 'héllo wörld 🎉\n');
      const latin1 = path.join(dir, 'latin1.txt');
      fs.writeFileSync(latin1, Buffer.from([0x68, 0x69, 0x20, 0xe9, 0x74, 0xe9])); // "hi été" in Latin-1
      assert.throws(
        () => loadCorpus(latin1),
        (e: Error) => e instanceof CorpusError && /latin1\.txt" is not UTF-8 text at byte 3/.test(e.message),
      );
      const cut = path.join(dir, 'cut.txt');
      fs.writeFileSync(cut, Buffer.concat([Buffer.from('ok '), Buffer.from('🎉').subarray(0, 3)]));
      assert.throws(() => loadCorpus(cut), /cut\.txt" is not UTF-8 text at byte 3/);
      const fifo = path.join(dir, 'fifo');
      execFileSync('mkfifo', [fifo]);
      assert.throws(
        () => loadCorpus(fifo),
        (e: Error) =>
          e instanceof CorpusError &&
          /fifo" is a pipe, not a regular file \(every stage process reads the same path\)/.test(e.message),
      );
      assert.throws(() => loadCorpus('/dev/zero'), /"\/dev\/zero" is a device, not a regular file/);
      assert.throws(() => loadCorpus(dir), /is a directory, not a regular file/);
      assert.ok(MAX_CORPUS_BYTES >= 64 * 1024 * 1024, 'tinyshakespeare-sized corpora and far beyond');
      // A file whose size says 0 may hold more (/proc): the limit holds while reading.
      assert.equal(fs.statSync('/proc/self/status').size, 0);
      assert.throws(
        () => readRegularFile('/proc/self/status', 16),
        (e: Error) =>
          e instanceof RegularFileError &&
          e.reason === 'too-big' &&
          /holds more than the limit of 16 bytes/.test(e.message),
      );
      assert.match(readRegularFile('/proc/self/status', 1 << 20).toString(), /^Name:/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses an empty corpus text', () => {
    assert.throws(() => new Corpus('inline', ''), /inline: corpus is empty/);
  });
});
