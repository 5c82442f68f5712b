import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { resolveConfig } from '../job/config';
import { train } from '../cli/train';
import { trainCommand } from '../cli/train-command';
import { TRAIN_DEFAULTS } from '../job/defaults';
import { CheckpointError, checkFiles, corpusDigest, readCheckpointMeta } from '../job/checkpoint';
import { writeFileDurably } from '../base/durable-file';
import { TrainConfig, corpusFor, modelSpecFor } from '../models/train-config';
import { paramChecksum } from '../models/reference-train';
import { UsageError } from '../cli/args';

const tempDir = (prefix: string) => fs.mkdtempSync(path.join(os.tmpdir(), prefix));

function tiny(extra: Partial<TrainConfig> = {}): TrainConfig {
  return {
    ...TRAIN_DEFAULTS,
    model: 'mlp',
    microbatchSize: 2,
    seq: 4,
    layers: 2,
    width: 8,
    lr: 1e-2,
    warmup: 1,
    valBatches: 1,
    ...extra,
  };
}

const job = (t: TrainConfig, iterations: number, firstIteration = 0) =>
  resolveConfig({
    job: 'durable',
    stages: 2,
    microbatches: 2,
    profile: 'train',
    iterations,
    firstIteration,
    train: t,
  });

const local = { transport: 'local' as const, processes: 'single' as const };

/** Runs `baton train ARGS --json` in this process; its JSON. */
async function trainCli(...args: string[]): Promise<Record<string, unknown>> {
  const out: string[] = [];
  const code = await trainCommand([...args, '--json'], (s) => out.push(s));
  assert.equal(code, 0);
  return JSON.parse(out.join('')) as Record<string, unknown>;
}

describe('checkpoints: durable writes, refused truncations, resume from meta.json', function () {
  this.timeout(120_000);

  it('writes a file atomically: the old content stays until the new one is whole, no temp file is left', () => {
    const dir = tempDir('baton-durable-');
    const f = path.join(dir, 'x.json');
    writeFileDurably(f, '{"a":1}');
    assert.equal(fs.readFileSync(f, 'utf8'), '{"a":1}');
    writeFileDurably(f, new Uint8Array([1, 2, 3]));
    assert.deepEqual([...fs.readFileSync(f)], [1, 2, 3]);
    assert.deepEqual(fs.readdirSync(dir), ['x.json']);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('refuses a checkpoint with meta.json or any stage file cut short at any byte', async () => {
    const dir = tempDir('baton-trunc-');
    const t = tiny({ totalIterations: 1, checkpoint: dir });
    await train(job(t, 1), local);
    const corpus = corpusFor(t);
    const spec = modelSpecFor(t, corpus.vocabSize);
    const check = () =>
      checkFiles(dir, readCheckpointMeta(dir), {
        corpus: corpusDigest(corpus.text),
        checksumOf: (p) => paramChecksum(spec, p),
      });
    check(); // whole: accepted
    const files = fs.readdirSync(dir).filter((f) => f === 'meta.json' || f.endsWith('.cbor'));
    assert.equal(files.length, 3);
    let cuts = 0;
    for (const f of files) {
      const full = fs.readFileSync(path.join(dir, f));
      // Every byte of meta.json; of a stage file (whose sha256 meta names, so every cut is
      // alike to the check), every byte of its first and last 256 and every 37th between.
      const ends = (n: number) => f === 'meta.json' || n < 256 || n >= full.length - 256 || n % 37 === 0;
      for (let n = 0; n < full.length; n++) {
        if (!ends(n)) continue;
        fs.writeFileSync(path.join(dir, f), full.subarray(0, n));
        assert.throws(check, (e: unknown) => e instanceof CheckpointError, `${f} cut to ${n} of ${full.length} bytes`);
        cuts++;
      }
      fs.writeFileSync(path.join(dir, f), full);
    }
    check();
    assert.ok(cuts > 2000, `${cuts} truncations tried`);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('--resume without repeating flags continues to the uninterrupted checksum, and --iterations larger extends it', async () => {
    const dir = tempDir('baton-resume-cli-');
    const t = tiny({ totalIterations: 4, checkpoint: dir, checkpointEvery: 2 });
    const full = await train(job({ ...t, checkpoint: null, checkpointEvery: 0 }, 4), local);
    // The first half of the same run: its checkpoint at iteration 2 names the whole run's settings.
    await train(job(t, 2), local);
    assert.equal(readCheckpointMeta(dir).nextIteration, 2);
    const resumed = await trainCli('--checkpoint', dir, '--resume');
    assert.equal(resumed.start_iteration, 2);
    assert.equal(resumed.iterations_run, 2);
    assert.equal(resumed.param_checksum, full.param_checksum);
    await assert.rejects(
      trainCli('--checkpoint', dir, '--resume', '--iterations', '3'),
      (e: unknown) => e instanceof UsageError && /--iterations 3 is below the saved run's 4/.test((e as Error).message),
    );
    await assert.rejects(
      trainCli('--checkpoint', dir, '--resume', '--iterations', '6', '--width', '16'),
      (e: Error) => e.name === 'CheckpointError' && /width 8 \(asked 16\)/.test(e.message),
    );
    // A flag that may change (the policy) is taken; one that may not (the width) is refused.
    const extended = await trainCli('--checkpoint', dir, '--resume', '--iterations', '6', '--policy', '1f1b');
    assert.equal(extended.start_iteration, 4);
    assert.equal(extended.iterations_run, 2);
    assert.equal(readCheckpointMeta(dir).nextIteration, 6);
    assert.notEqual(extended.param_checksum, full.param_checksum);
    fs.rmSync(dir, { recursive: true, force: true });
  });
});
