import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { resolveConfig, JobConfig } from '../actors/config';
import { train } from '../cli/train';
import { runJob } from '../actors/job';
import { loadBackend } from '../models/backend';
import { paramChecksum, trainReference } from '../models/reference-train';
import { TRAIN_DEFAULTS, TrainConfig, corpusFor, modelSpecFor } from '../models/train-config';
import { checkResumable, readCheckpointMeta, resumeSnapshot } from '../actors/checkpoint';
import { ASYNC_DEFAULTS } from '../actors/param-store';
import { natsServerForSuite } from './nats-server-fixture';

const ITERATIONS = 3;

function tiny(model: 'gpt' | 'mlp', extra: Partial<TrainConfig> = {}): TrainConfig {
  return { ...TRAIN_DEFAULTS, model, microbatchSize: 4, seq: model === 'gpt' ? 16 : 8, layers: 8, width: 32, heads: 2, lr: 1e-2, warmup: 1, totalIterations: ITERATIONS, valBatches: 2, ...extra };
}

function job(t: TrainConfig, P: number, V: number, policy: string, jitterSeed = 0, extra: Partial<JobConfig> = {}): JobConfig {
  return resolveConfig({ job: `t${P}${V}${policy.replace(/[^a-z0-9]/g, '')}${jitterSeed}`, stages: P, chunks: V, microbatches: 4, policy, profile: 'train', jitter: jitterSeed ? 'paper' : 'none', seed: jitterSeed, iterations: ITERATIONS, train: t, stallTimeoutMs: 120000, ...extra });
}

const local = { transport: 'local' as const, processes: 'single' as const };

function maxRelDiff(a: Float32Array, b: Float32Array): number {
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i] - b[i]) / Math.max(1e-3, Math.abs(b[i])));
  return worst;
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
          const runs: [string, number][] = [['bf', 0], ['fb', 0], [V === 1 ? '1f1b' : 'interleaved-1f1b', 0], ['gpipe', 0], ['bf', 11], ['bf', 12], ['bfw', 0], ...(V === 1 ? [['zb-h1', 0] as [string, number]] : [])];
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
          const refSum = paramChecksum(spec, ref.params);
          if (refSum !== r.param_checksum) {
            // Not bitwise equal (different op graphs): then equal within rtol 1e-5.
            const t2 = { ...t, checkpoint: tempDir('baton-ck-') };
            await train(job(t2, P, V, 'bf'), local);
            const params = new Map<string, Float32Array>();
            for (let s = 0; s < P; s++) for (const [n, p] of Object.entries(resumeSnapshot({ ...t2, startIteration: 1 }, s)!.params)) params.set(n, p);
            for (const [name, p] of ref.params) {
              const q = params.get(name);
              assert.ok(q, `missing ${name}`);
              assert.ok(maxRelDiff(q!, p) <= 1e-5, `P=${P} V=${V} ${name}: max relative difference ${maxRelDiff(q!, p)}`);
            }
          }
        }
    });
  }

  it('jitter seeds really change the execution order', async () => {
    const t = tiny('gpt');
    const order = async (seed: number) => {
      const r = await runJob(job(t, 4, 1, 'bf', seed), { clock: 'real' });
      return r.events.filter((e) => e.type === 'task-start').map((e) => `${e.stage}:${e.type === 'task-start' ? e.kind + e.mb : ''}`).join(' ');
    };
    assert.notEqual(await order(11), await order(12));
  });

  it('resumes from a checkpoint to the same parameters as an uninterrupted run', async () => {
    const dir = tempDir('baton-resume-');
    const t = tiny('mlp', { totalIterations: 4 });
    const full = await train(job(t, 2, 1, 'bf', 0, { iterations: 4 }), local);
    const withCk = { ...t, checkpoint: dir, checkpointEvery: 2 };
    const half = await train(job(withCk, 2, 1, 'bf', 0, { iterations: 2 }), local);
    assert.equal(readCheckpointMeta(dir).nextIteration, 2);
    assert.notEqual(half.param_checksum, full.param_checksum);
    const resumed = await train(job({ ...withCk, startIteration: 2 }, 2, 1, 'bf', 0, { iterations: 2, firstIteration: 2 }), local);
    assert.equal(resumed.start_iteration, 2);
    assert.equal(resumed.param_checksum, full.param_checksum);
  });

  it('refuses to resume a checkpoint into other stages or model sizes, naming them, and a corrupt meta.json, naming it', async () => {
    const dir = tempDir('baton-resume-');
    const t = tiny('mlp', { totalIterations: 1, checkpoint: dir });
    await train(job(t, 2, 1, 'bf', 0, { iterations: 1 }), local);
    const meta = readCheckpointMeta(dir);
    const same = { model: t.model, seq: t.seq, layers: t.layers, width: t.width, heads: t.heads };
    checkResumable(dir, meta, { stages: 2, chunks: 1, train: same });
    assert.throws(() => checkResumable(dir, meta, { stages: 1, chunks: 1, train: { ...same, width: t.width * 2 } }),
      (e: Error) => e.name === 'CheckpointError' && /saved with stages 2 \(asked 1\), width \d+ \(asked \d+\)/.test(e.message));
    fs.writeFileSync(path.join(dir, 'meta.json'), '{bad');
    assert.throws(() => readCheckpointMeta(dir), (e: Error) => e.name === 'CheckpointError' && /meta\.json: not valid JSON/.test(e.message));
    fs.rmSync(dir, { recursive: true, force: true });
  });

  describe('over NATS with one process per stage', () => {
    const server = natsServerForSuite();
    it('reaches the same checksum as the local bus for bf, 1f1b and a jittered run', async () => {
      const t = tiny('gpt');
      const base = await train(job(t, 2, 1, 'bf'), local);
      for (const [policy, seed] of [['bf', 0], ['1f1b', 0], ['bf', 5]] as const) {
        const r = await train(job(t, 2, 1, policy, seed, { job: `nats${policy.replace(/[^a-z0-9]/g, '')}${seed}` }), { transport: 'nats', processes: 'per-stage', natsUrl: server().url });
        assert.equal(r.summary.processes, 2);
        assert.equal(r.param_checksum, base.param_checksum, `${policy} seed ${seed}`);
      }
    });

    it('trains asynchronously with FRESCO under bf and binding 1f1b, parameter stores in the stage processes', async () => {
      for (const policy of ['bf', '1f1b']) {
        const t = tiny('mlp', { layers: 4, totalIterations: 1 });
        const cfg = resolveConfig({
          job: `nasync${policy.replace(/[^a-z0-9]/g, '')}`, stages: 2, microbatches: 12, iterations: 1, policy, profile: 'train', mode: 'async', train: t, bufferLimit: 2,
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
