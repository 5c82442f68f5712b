import { strict as assert } from 'assert';
import { parseFlags } from '../cli/args';
import { TRAIN_FLAGS, train, trainConfigsFromFlags } from '../cli/train';
import { BatonEvent } from '../stage/events';
import { JobResult } from '../job/run-local';
import { natsServerForSuite } from './nats-server-fixture';
import { stageProcessPid } from '../bench/fault-inject';

/** An asynchronous train of a small GPT (a block per stage) on P stages, I iterations of M = 4 (4·I updates a stage), snapshots every N updates. */
function asyncJob(job: string, o: { P: number; I: number; N: number; consistency: string }, url: string) {
  const argv = [
    ...['--job', job, '--mode', 'async', '--stages', String(o.P), '--microbatches', '4', '--iterations', String(o.I)],
    ...[
      '--layers',
      String(o.P),
      '--width',
      '32',
      '--heads',
      '2',
      '--seq',
      '16',
      '--microbatch-size',
      '4',
      '--warmup',
      '1',
    ],
    ...['--snapshot-every', String(o.N), '--consistency', o.consistency, '--val-batches', '1'],
    ...['--transport', 'nats', '--nats', url],
  ];
  return trainConfigsFromFlags(parseFlags(argv, TRAIN_FLAGS, 'train').flags);
}

describe('recovery of an asynchronous train from its snapshots (one process per stage)', function () {
  this.timeout(240_000);
  const server = natsServerForSuite();

  for (const { P, kill, consistency } of [
    { P: 2, kill: 0, consistency: 'inconsistent' },
    { P: 3, kill: 1, consistency: 'fresco' },
  ])
    it(`P=${P}, ${consistency}: stage ${kill}'s process killed mid-run resumes from its snapshot, the survivors from their state as it stood; the run reports the updates lost at each stage and trains to the end`, async () => {
      const job = `asyncrec${P}`;
      const N = 8;
      const I = 8;
      const total = 4 * I;
      const { cfg, setup } = asyncJob(job, { P, I, N, consistency }, server().url);
      // Killed once the trace shows the stage's 12th backward: half a snapshot interval after its
      // first snapshot (it would have to run 4 backwards ahead of its trace to have sent the next).
      let backwards = 0;
      let killedAt = 0;
      const watch = (e: BatonEvent) => {
        if (e.type !== 'task-end' || e.kind !== 'B' || e.stage !== kill || killedAt) return;
        if (++backwards < N + N / 2) return;
        killedAt = Date.now();
        process.kill(stageProcessPid(job, kill), 'SIGKILL');
      };
      let result: JobResult | null = null;
      const hooks = { sinks: [watch], onResult: (x: JobResult) => (result = x) };
      const r = await train(cfg, { ...setup, threads: 1, maxRestarts: 2 }, hooks);
      assert.ok(killedAt > 0, 'the stage process was killed');
      assert.equal(r.recoveries?.length, 1, JSON.stringify(r.recoveries));
      const rec = r.recoveries![0];
      assert.match(rec.failed ?? '', new RegExp(`^${job}-stage${kill}-`));
      assert.deepEqual(rec.stages, [kill]);
      assert.match(rec.reason, /signal SIGKILL/);
      const lost = rec.lost_updates!;
      const skipped = rec.skipped_updates!;
      const n = rec.resumed_at_microbatch!;
      console.log(
        `      (detected after ${rec.detected_at - killedAt} ms, resumed ${rec.recovery_ms} ms later at microbatch ${n} of ${total}; snapshots at ${JSON.stringify(rec.snapshot_updates)} updates; updates lost ${JSON.stringify(lost)}, microbatches skipped ${JSON.stringify(skipped)}; kept ${JSON.stringify(r.kept_state)})`,
      );
      // The killed stage lost what it did since its snapshot: at least the backwards its trace
      // showed past it, at most N - 1 (2N - 1 had its newest snapshot been on its way).
      assert.equal(rec.snapshot_updates![kill] % N, 0);
      assert.ok(lost[kill] > 0 && lost[kill] <= 2 * N - 1, `stage ${kill} lost ${lost[kill]}`);
      // Microbatches skipped for good there: those a later stage had applied past its snapshot —
      // every update it lost (a later stage applies a microbatch first) and those in flight at it
      // (at most P - kill).
      assert.ok(skipped[kill] >= lost[kill] && skipped[kill] <= 2 * N - 1 + P - kill, `skipped ${skipped}`);
      // The survivors resumed from their state as it stood when their job was dropped: nothing
      // lost, and they skip at most the microbatches they had in flight (P - s).
      for (let s = 0; s < P; s++) {
        if (s === kill) continue;
        assert.equal(lost[s], 0, `stage ${s} lost ${lost[s]}`);
        assert.ok(skipped[s] >= 0 && skipped[s] <= P - s, `stage ${s} skipped ${skipped[s]}`);
      }
      // The stream went on to its end: every microbatch from n on was trained, and each stage's updates and skips add up.
      const reports = result!.records[0].reports as { store: { updates: number } }[];
      reports.forEach((rep, s) => assert.equal(rep.store.updates + skipped[s], total, `stage ${s}`));
      assert.equal(r.losses.length, total - n);
      assert.ok(r.losses.every(Number.isFinite) && Number.isFinite(r.final_loss) && Number.isFinite(r.val_loss));
    });
});
