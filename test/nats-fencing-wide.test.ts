import { strict as assert } from 'assert';
import { resolveConfig, JobConfig } from '../job/config';
import { TRAIN_DEFAULTS } from '../job/defaults';
import { train } from '../cli/train';
import { TrainSetup } from '../cli/train-setup';
import { injectFault } from '../bench/fault-inject';
import { loadBackend } from '../models/backend';

// Baton's own accounts-based server (no natsUrl) with the jobs whose stage processes use
// more than a plain pipeline's subjects: a wide job's lanes (tp, tp-reduce, dp-reduce), an
// interleaved job's wrap from the last stage back to stage 0 (--chunks), lost messages resent (baton.<job>.resend.<peer>), and recovery's state messages and a restarted
// process (its credentials down its new stdin). None of the job's own connections may hit a
// permission: the server's log has no violation.

const gpt = (
  job: string,
  o: { stages: number; chunks?: number; tp?: number; dp?: number; iterations: number; drop?: number },
) =>
  resolveConfig({
    job,
    stages: o.stages,
    chunks: o.chunks ?? 1,
    microbatches: 2,
    tp: o.tp ?? 1,
    dp: o.dp ?? 1,
    iterations: o.iterations,
    profile: 'train',
    stallTimeoutMs: 120_000,
    train: {
      ...TRAIN_DEFAULTS,
      model: 'gpt',
      microbatchSize: 2,
      seq: 8,
      layers: 2 * o.stages * (o.chunks ?? 1),
      width: 16,
      heads: 4,
      totalIterations: o.iterations,
      valBatches: 1,
    },
  });

/** A train on Baton's own server; the lines of its server's log that name a violation. */
async function onOwnServer(cfg: JobConfig, extra: Partial<TrainSetup> = {}, onIteration?: () => void) {
  let log = () => '';
  const setup = { transport: 'nats' as const, processes: 'per-stage' as const, threads: 1, ...extra };
  const r = await train(cfg, { ...setup, onServer: (s) => (log = s.log) }, onIteration ? { onIteration } : {});
  return {
    r,
    violations: log()
      .split('\n')
      .filter((l) => /Violation/i.test(l)),
  };
}

describe("NATS fencing on Baton's own server: wide jobs, resends and recovery within their permissions", function () {
  this.timeout(300_000);
  before(async () => {
    await loadBackend({ force: 'wasm' });
  });

  it('TP 2 × DP 2 × P 2 (8 stage processes, each its own user): no permission violation', async () => {
    const { r, violations } = await onOwnServer(gpt('fwide', { stages: 2, tp: 2, dp: 2, iterations: 2 }));
    assert.equal(r.summary.processes, 8);
    assert.deepEqual(violations, []);
  });

  it('P 2 × V 2 interleaved (stage 1 sends stage 0 its second chunk, stage 0 returns its gradient): completes, no permission violation', async () => {
    const { r, violations } = await onOwnServer(gpt('fchunk', { stages: 2, chunks: 2, iterations: 3 }));
    assert.equal(r.summary.processes, 2);
    assert.equal(r.summary.chunks, 2);
    assert.equal(r.iterations_run, 3);
    assert.deepEqual(violations, []);
  });

  it('injected drops resent between ring neighbours: no permission violation', async () => {
    const cfg = gpt('fdrop', { stages: 3, iterations: 3 });
    const faults = { drop: 0.2, dup: 0, delay: 0, delayMs: 20, reorder: 0, seed: 1 };
    const { r, violations } = await onOwnServer({ ...cfg, faults });
    assert.ok((r.summary.resent ?? 0) >= 1, `resent ${r.summary.resent}`);
    assert.deepEqual(violations, []);
  });

  it('a killed stage process restarted with its credentials on stdin, its state kept: no permission violation', async () => {
    const f = injectFault('frestart', 1, 'SIGKILL', 1);
    try {
      const { r, violations } = await onOwnServer(
        gpt('frestart', { stages: 3, iterations: 3 }),
        { maxRestarts: 2 },
        f.onIteration as () => void,
      );
      assert.ok(f.at() > 0, 'the fault was injected');
      assert.equal(r.recoveries?.length, 1, JSON.stringify(r.recoveries));
      assert.deepEqual(violations, []);
    } finally {
      f.cleanup();
    }
  });
});
