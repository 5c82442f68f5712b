import { strict as assert } from 'assert';
import { parseFlags } from '../cli/args';
import { TRAIN_FLAGS, train, trainConfigsFromFlags } from '../cli/train';
import { BatonEvent } from '../stage/events';
import { JobResult } from '../job/run-local';
import { natsServerForSuite } from './nats-server-fixture';
import { stageProcessPid } from '../bench/fault-inject';

/** An asynchronous train of a small GPT on P = 2, I iterations of M = 4 (4·I updates a stage), snapshots every N updates. */
function asyncJob(job: string, iterations: number, every: number, url: string) {
  const argv = [
    ...['--job', job, '--mode', 'async', '--stages', '2', '--microbatches', '4', '--iterations', String(iterations)],
    ...['--layers', '2', '--width', '32', '--heads', '2', '--seq', '16', '--microbatch-size', '4', '--warmup', '1'],
    ...['--snapshot-every', String(every), '--val-batches', '1', '--transport', 'nats', '--nats', url],
  ];
  return trainConfigsFromFlags(parseFlags(argv, TRAIN_FLAGS, 'train').flags);
}

describe('recovery of an asynchronous train from its snapshots (one process per stage)', function () {
  this.timeout(240_000);
  const server = natsServerForSuite();

  it('a stage process killed mid-run resumes from its snapshot, the run reports the updates lost at each stage and trains to the end', async () => {
    const job = 'asyncrec';
    const N = 8;
    const I = 8;
    const total = 4 * I;
    const { cfg, setup } = asyncJob(job, I, N, server().url);
    // Killed once the trace shows stage 0's 12th backward: half a snapshot interval after its
    // first snapshot (it would have to run 4 backwards ahead of its trace to have sent the next).
    let backwards = 0;
    let killedAt = 0;
    const watch = (e: BatonEvent) => {
      if (e.type !== 'task-end' || e.kind !== 'B' || e.stage !== 0 || killedAt) return;
      if (++backwards < N + N / 2) return;
      killedAt = Date.now();
      process.kill(stageProcessPid(job, 0), 'SIGKILL');
    };
    let result: JobResult | null = null;
    const r = await train(
      cfg,
      { ...setup, threads: 1, maxRestarts: 2 },
      { sinks: [watch], onResult: (x) => (result = x) },
    );
    assert.ok(killedAt > 0, 'the stage process was killed');
    assert.equal(r.recoveries?.length, 1, JSON.stringify(r.recoveries));
    const rec = r.recoveries![0];
    assert.match(rec.failed ?? '', new RegExp(`^${job}-stage0-`));
    assert.deepEqual(rec.stages, [0]);
    assert.match(rec.reason, /signal SIGKILL/);
    const lost = rec.lost_updates!;
    const skipped = rec.skipped_updates!;
    const n = rec.resumed_at_microbatch!;
    console.log(
      `      (detected after ${rec.detected_at - killedAt} ms, resumed ${rec.recovery_ms} ms later at microbatch ${n} of ${total}; snapshots at ${JSON.stringify(rec.snapshot_updates)} updates; updates lost ${JSON.stringify(lost)}, microbatches skipped ${JSON.stringify(skipped)}; kept ${JSON.stringify(r.kept_state)})`,
    );
    // The killed stage lost what it did since its snapshot: at least the backwards its trace
    // showed past it, at most N - 1 (2N - 1 had its newest snapshot been on its way).
    assert.equal(rec.snapshot_updates![0] % N, 0);
    assert.ok(lost[0] > 0 && lost[0] <= 2 * N - 1, `stage 0 lost ${lost[0]}`);
    // The survivor resumed from its state as it stood when its job was dropped: nothing lost.
    assert.equal(lost[1], 0);
    // Microbatches skipped for good: at stage 0 those the survivor had applied past its snapshot —
    // every update it lost (stage 1 applies a microbatch before stage 0 does) and those in flight
    // there, at most 2N - 1 + 2 at P = 2; at stage 1 at most its own in flight (1).
    assert.ok(skipped[0] >= lost[0] && skipped[0] <= 2 * N + 1, `skipped ${JSON.stringify(skipped)}`);
    assert.ok(skipped[1] >= 0 && skipped[1] <= 1, `skipped ${JSON.stringify(skipped)}`);
    // The stream went on to its end: every microbatch from n on was trained, and each stage's updates and losses add up.
    const reports = result!.records[0].reports as { store: { updates: number } }[];
    reports.forEach((rep, s) => assert.equal(rep.store.updates + skipped[s], total, `stage ${s}`));
    assert.equal(r.losses.length, total - n);
    assert.ok(r.losses.every(Number.isFinite) && Number.isFinite(r.final_loss) && Number.isFinite(r.val_loss));
    assert.ok(!r.summary.pids.includes(0));
  });
});
