import { strict as assert } from 'assert';
import * as tf from '@tensorflow/tfjs';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { resolveConfig, JobConfig } from '../job/config';
import { train } from '../cli/train';
import { runJob } from '../job/run-local';
import { loadBackend } from '../models/backend';
import { paramChecksum, trainReference } from '../models/reference-train';
import { TrainConfig, corpusFor, modelSpecFor } from '../models/train-config';
import { TRAIN_DEFAULTS } from '../job/defaults';
import { checkResumable, readCheckpointMeta, resumeSnapshot } from '../job/checkpoint';
import { ASYNC_DEFAULTS } from '../job/defaults';
import { natsServerForSuite } from './nats-server-fixture';

const ITERATIONS = 3;

function tiny(model: 'gpt' | 'mlp', extra: Partial<TrainConfig> = {}): TrainConfig {
  return {
    ...TRAIN_DEFAULTS,
    model,
    microbatchSize: 4,
    seq: model === 'gpt' ? 16 : 8,
    layers: 8,
    width: 32,
    heads: 2,
    lr: 1e-2,
    warmup: 1,
    totalIterations: ITERATIONS,
    valBatches: 2,
    ...extra,
  };
}

function job(
  t: TrainConfig,
  P: number,
  V: number,
  policy: string,
  jitterSeed = 0,
  extra: Partial<JobConfig> = {},
): JobConfig {
  return resolveConfig({
    job: `t${P}${V}${policy.replace(/[^a-z0-9]/g, '')}${jitterSeed}`,
    stages: P,
    chunks: V,
    microbatches: 4,
    policy,
    profile: 'train',
    jitter: jitterSeed ? 'paper' : 'none',
    seed: jitterSeed,
    iterations: ITERATIONS,
    train: t,
    stallTimeoutMs: 120000,
    ...extra,
  });
}

const local = { transport: 'local' as const, processes: 'single' as const };

/** Another kernel set (native kernels, and their thread count, or tfjs's own) is refused as another backend is; returns the saved one. */
async function assertRefusesOtherKernelSet(
  dir: string,
  withKernels: (kernels: string) => string,
  resume: (d: string) => Promise<unknown>,
): Promise<string> {
  const saved = readCheckpointMeta(dir).kernels!;
  assert.match(saved, /^(tfjs|native-sgemm:.+;threads=\d+)$/);
  const other = saved === 'tfjs' ? 'native-sgemm:BatchMatMul;threads=64' : 'tfjs';
  const otherKernels = withKernels(other);
  await assert.rejects(
    resume(otherKernels),
    (e: Error) =>
      e.name === 'CheckpointError' &&
      e.message.includes(
        `saved by a run with the kernel set ${other} and this run has ${saved}; kernel sets round differently`,
      ),
  );
  return saved;
}

/** Temp dirs of this file's tests, removed when they end. */
const tempDirs: string[] = [];
function tempDir(prefix: string): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  tempDirs.push(d);
  return d;
}
after(() => {
  for (const d of tempDirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

describe('synchronous pipeline training with real compute', function () {
  this.timeout(600_000);
  before(async () => {
    await loadBackend({ force: 'wasm' });
  });

  for (const model of ['gpt', 'mlp'] as const) {
    it(`${model}: pipelined parameters equal the non-pipelined reference, and the checksum is the same for every policy and jitter seed (P in 1,2,4; V in 1,2)`, async () => {
      const t = tiny(model);
      const ref = trainReference(t, 4, ITERATIONS);
      const spec = modelSpecFor(t, corpusFor(t).vocabSize);
      for (const P of [1, 2, 4])
        for (const V of [1, 2]) {
          // bfw and zb-h1 split the backward into B and W (computed from the kept forward).
          const runs: [string, number][] = [
            ['bf', 0],
            ['fb', 0],
            [V === 1 ? '1f1b' : 'interleaved-1f1b', 0],
            ['gpipe', 0],
            ['bf', 11],
            ['bf', 12],
            ['bfw', 0],
            ...(V === 1 ? [['zb-h1', 0] as [string, number]] : []),
          ];
          const sums = new Set<string>();
          for (const [policy, jitterSeed] of runs) {
            const r = await train(job(t, P, V, policy, jitterSeed), local);
            sums.add(r.param_checksum);
            assert.equal(r.losses.length, ITERATIONS);
          }
          assert.equal(sums.size, 1, `P=${P} V=${V}: checksums differ across policies/jitter: ${[...sums].join(' ')}`);
          // Compare the parameters themselves with the reference.
          const r = await train(job(t, P, V, 'bf'), local);
          assert.equal(r.param_checksum, [...sums][0]);
          assert.equal(
            r.param_checksum,
            paramChecksum(spec, ref.params),
            `P=${P} V=${V}: the pipeline's parameters are not bitwise the reference's`,
          );
        }
    });
  }

  it('jitter seeds really change the execution order', async () => {
    const t = tiny('gpt');
    const order = async (seed: number) => {
      const r = await runJob(job(t, 4, 1, 'bf', seed), { clock: 'real' });
      return r.events
        .filter((e) => e.type === 'task-start')
        .map((e) => `${e.stage}:${e.type === 'task-start' ? e.kind + e.mb : ''}`)
        .join(' ');
    };
    assert.notEqual(await order(11), await order(12));
  });

  it('leaves no tensor behind: not per optimizer step, not per run (sync and async)', async () => {
    const t = tiny('mlp', { totalIterations: 4 });
    await train(job(t, 2, 1, 'bf', 0, { iterations: 4 }), local); // warm: backends and kernels made once
    for (const cfg of [
      job(t, 2, 1, 'bf', 0, { iterations: 4 }),
      job(t, 2, 1, '1f1b', 0, {
        iterations: 1,
        microbatches: 8,
        mode: 'async',
        async: { ...ASYNC_DEFAULTS, consistency: 'fresco', totalUpdates: 8 },
      }),
    ]) {
      const before = tf.memory().numTensors;
      await train(cfg, local);
      assert.equal(tf.memory().numTensors - before, 0, `${cfg.mode}: tensors left after the run`);
    }
  });

  it('resumes from a checkpoint to the same parameters as an uninterrupted run', async () => {
    const dir = tempDir('baton-resume-');
    const t = tiny('mlp', { totalIterations: 4 });
    const full = await train(job(t, 2, 1, 'bf', 0, { iterations: 4 }), local);
    const withCk = { ...t, checkpoint: dir, checkpointEvery: 2 };
    const half = await train(job(withCk, 2, 1, 'bf', 0, { iterations: 2 }), local);
    assert.equal(readCheckpointMeta(dir).nextIteration, 2);
    assert.notEqual(half.param_checksum, full.param_checksum);
    const resumed = await train(
      job({ ...withCk, startIteration: 2 }, 2, 1, 'bf', 0, { iterations: 2, firstIteration: 2 }),
      local,
    );
    assert.equal(resumed.start_iteration, 2);
    assert.equal(resumed.param_checksum, full.param_checksum);
  });

  it('refuses a checkpoint whose files do not match its meta.json: a changed stage file, another iteration, another checksum', async () => {
    const dir = tempDir('baton-resume-');
    const t = tiny('mlp', { totalIterations: 4, checkpoint: dir, checkpointEvery: 2 });
    await train(job(t, 2, 1, 'bf', 0, { iterations: 2 }), local);
    const resume = (d: string) =>
      train(
        job({ ...t, checkpoint: d, startIteration: readCheckpointMeta(d).nextIteration }, 2, 1, 'bf', 0, {
          iterations: 2,
          firstIteration: readCheckpointMeta(d).nextIteration,
        }),
        local,
      );
    const variant = (edit: (d: string) => void) => {
      const d = tempDir('baton-resume-');
      for (const f of fs.readdirSync(dir)) fs.copyFileSync(path.join(dir, f), path.join(d, f));
      edit(d);
      return d;
    };
    const editMeta = (d: string, change: (m: Record<string, unknown>) => void) => {
      const m = JSON.parse(fs.readFileSync(path.join(d, 'meta.json'), 'utf8')) as Record<string, unknown>;
      change(m);
      fs.writeFileSync(path.join(d, 'meta.json'), JSON.stringify(m));
    };
    const flipped = variant((d) => {
      const f = path.join(d, 'stage-0-it2.cbor');
      const b = fs.readFileSync(f);
      b[b.length - 3] ^= 0x40;
      fs.writeFileSync(f, b);
    });
    await assert.rejects(
      resume(flipped),
      (e: Error) =>
        e.name === 'CheckpointError' && /stage-0-it2\.cbor is not the file meta\.json was written with/.test(e.message),
    );
    const later = variant((d) => {
      // Claim iteration 3 with every name and digest consistent: only the optimizers' step counts tell.
      for (const st of [0, 1])
        fs.renameSync(path.join(d, `stage-${st}-it2.cbor`), path.join(d, `stage-${st}-it3.cbor`));
      editMeta(d, (m) => {
        m.nextIteration = 3;
        m.files = Object.fromEntries(
          Object.entries(m.files as Record<string, string>).map(([k, v]) => [k.replace('-it2', '-it3'), v]),
        );
      });
    });
    await assert.rejects(resume(later), (e: Error) =>
      /chunk 0's optimizer took 2 steps, but meta\.json says the run is at iteration 3/.test(e.message),
    );
    const otherSum = variant((d) => editMeta(d, (m) => (m.checksum = '0'.repeat(64))));
    await assert.rejects(resume(otherSum), (e: Error) =>
      /the parameters in the stage files hash to [0-9a-f]{16}, meta\.json says 0{16}/.test(e.message),
    );
    const otherCorpus = variant((d) => editMeta(d, (m) => (m.corpus = 'f'.repeat(64))));
    await assert.rejects(resume(otherCorpus), (e: Error) => /it was trained on another corpus/.test(e.message));
    // A later checkpoint interrupted before its meta.json leaves this one whole.
    const interrupted = variant((d) => {
      fs.writeFileSync(path.join(d, 'stage-0-it4.cbor'), 'half');
      fs.writeFileSync(path.join(d, 'stage-1-it4.cbor.tmp'), 'hal');
    });
    assert.equal((await resume(interrupted)).start_iteration, 2);
    assert.deepEqual(
      fs.readdirSync(interrupted).sort(),
      ['meta.json', 'stage-0-it4.cbor', 'stage-1-it4.cbor'],
      'the resumed run wrote its final checkpoint and removed the files meta no longer names',
    );
    // Another backend rounds differently: the resumed run would continue neither run.
    assert.equal(readCheckpointMeta(dir).backend, 'wasm');
    const otherBackend = variant((d) => editMeta(d, (m) => (m.backend = 'cpu')));
    await assert.rejects(
      resume(otherBackend),
      (e: Error) =>
        e.name === 'CheckpointError' &&
        /saved by a run on the cpu backend and this run would use wasm; .*\(give --backend cpu\)/.test(e.message),
    );
    const saved = await assertRefusesOtherKernelSet(
      dir,
      (k) => variant((d) => editMeta(d, (m) => (m.kernels = k))),
      resume,
    );
    const resumed = await resume(dir);
    assert.equal(resumed.start_iteration, 2);
    assert.equal(resumed.kernels, saved);
  });

  it('keeps the last finite checkpoint when the run diverges, instead of saving NaN parameters over it', async () => {
    const dir = tempDir('baton-diverge-');
    const t = tiny('mlp', {
      layers: 2,
      width: 16,
      lr: 1e6,
      warmup: 0,
      totalIterations: 6,
      checkpoint: dir,
      checkpointEvery: 1,
    });
    const r = await train(job(t, 2, 1, 'bf', 0, { iterations: 6 }), local);
    assert.ok(!Number.isFinite(r.final_loss), 'the run diverged');
    const meta = readCheckpointMeta(dir);
    assert.ok(
      meta.nextIteration >= 1 && meta.nextIteration < 6,
      `the checkpoint stayed at a finite iteration, not ${meta.nextIteration}`,
    );
    for (const stage of [0, 1]) {
      const snap = resumeSnapshot({ ...t, startIteration: meta.nextIteration }, stage)!;
      assert.ok(
        Object.values(snap.params).every((p) => p.every(Number.isFinite)),
        `stage ${stage}'s saved parameters are finite`,
      );
    }
  });

  it('refuses before it runs a model whose final report the bus could not carry, instead of failing at the end', async () => {
    const wide = tiny('gpt', { width: 768, layers: 2, seq: 8, microbatchSize: 1 });
    // Refused at wiring: a run would fail only at its end, with the codec's CodecError.
    await assert.rejects(
      train(job(wide, 2, 1, 'bf'), local),
      (e: Error) =>
        e.name === 'JobConfigError' &&
        /stage 0: the report carrying its parameters and AdamW moments .* would be about \d+ bytes, over the codec's limit of 67108864 bytes/.test(
          e.message,
        ),
    );
  });

  it('refuses to resume a checkpoint into other stages or model sizes, naming them, and a corrupt meta.json, naming it', async () => {
    const dir = tempDir('baton-resume-');
    const t = tiny('mlp', { totalIterations: 1, checkpoint: dir });
    await train(job(t, 2, 1, 'bf', 0, { iterations: 1 }), local);
    const meta = readCheckpointMeta(dir);
    const M = (meta.config as { microbatches: number }).microbatches;
    checkResumable(dir, meta, { stages: 2, chunks: 1, microbatches: M, train: t });
    assert.throws(
      () => checkResumable(dir, meta, { stages: 1, chunks: 1, microbatches: M, train: { ...t, width: t.width * 2 } }),
      (e: Error) =>
        e.name === 'CheckpointError' && /saved with stages 2 \(asked 1\), width \d+ \(asked \d+\)/.test(e.message),
    );
    assert.throws(
      () =>
        checkResumable(dir, meta, {
          stages: 2,
          chunks: 1,
          microbatches: M + 1,
          train: { ...t, seed: t.seed + 1, totalIterations: 0, heads: t.heads + 1 },
        }),
      (e: Error) =>
        /saved with microbatches \d+ \(asked \d+\), seed \d+ \(asked \d+\), iterations 1 \(asked 0, which is fewer\); a resumed run continues the saved one exactly/.test(
          e.message,
        ),
    );
    fs.writeFileSync(path.join(dir, 'meta.json'), '{bad');
    assert.throws(
      () => readCheckpointMeta(dir),
      (e: Error) => e.name === 'CheckpointError' && /meta\.json: not valid JSON/.test(e.message),
    );
    fs.rmSync(dir, { recursive: true, force: true });
  });

  describe('over NATS with one process per stage', () => {
    const server = natsServerForSuite();
    it('reaches the same checksum as the local bus for bf, 1f1b and a jittered run', async () => {
      const t = tiny('gpt');
      // The same kernel set in both: native kernels round by their thread count.
      const base = await train(job(t, 2, 1, 'bf'), { ...local, threads: 1 });
      for (const [policy, seed] of [
        ['bf', 0],
        ['1f1b', 0],
        ['bf', 5],
      ] as const) {
        const r = await train(job(t, 2, 1, policy, seed, { job: `nats${policy.replace(/[^a-z0-9]/g, '')}${seed}` }), {
          transport: 'nats',
          processes: 'per-stage',
          natsUrl: server().url,
          threads: 1,
        });
        assert.equal(r.summary.processes, 2);
        assert.equal(r.kernels, base.kernels);
        assert.equal(r.param_checksum, base.param_checksum, `${policy} seed ${seed}`);
      }
    });

    it('trains asynchronously with FRESCO under bf and binding 1f1b, parameter stores in the stage processes', async () => {
      for (const policy of ['bf', '1f1b']) {
        const t = tiny('mlp', { layers: 4, totalIterations: 1 });
        const cfg = resolveConfig({
          job: `nasync${policy.replace(/[^a-z0-9]/g, '')}`,
          stages: 2,
          microbatches: 12,
          iterations: 1,
          policy,
          profile: 'train',
          mode: 'async',
          train: t,
          bufferLimit: 2,
          async: { ...ASYNC_DEFAULTS, consistency: 'fresco', lr: 1e-3, warmup: 2, totalUpdates: 12, pipemareSteps: 12 },
        });
        const r = await train(cfg, { transport: 'nats', processes: 'per-stage', natsUrl: server().url });
        assert.equal(r.summary.processes, 2);
        assert.equal(r.losses.length, 12);
        assert.deepEqual(r.summary.updates, [12, 12]);
        assert.ok((r.summary.extra_state_bytes ?? [])[0] > 0, 'stage 0 held FRESCO bases');
      }
    });
  });
});
