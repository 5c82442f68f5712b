import { strict as assert } from 'assert';
import { resolveConfig } from '../job/config';
import { IterationRecord } from '../actors/coordinator';
import { train } from '../cli/train';
import { runOnce } from '../cli/run-once';
import { RestartsExhaustedError } from '../job/recovery-errors';
import { DistributedResult } from '../job/run-distributed';
import { natsServerForSuite } from './nats-server-fixture';
import { batonInProcess } from './helpers-cli';
import { startNatsServer } from '../transport/nats-server';
import { faultedTrainJob, injectFault, injectServerRestart, stageProcessPid } from '../bench/fault-inject';

const gpt = (job: string, iterations: number) =>
  faultedTrainJob(job, iterations, { layers: 4, width: 32, heads: 2, seq: 16, microbatchSize: 4 });

describe('recovery by replaying the iteration (sync, one process per stage)', function () {
  this.timeout(240_000);
  const server = natsServerForSuite();
  const setup = (stateEvery = 1) => ({
    transport: 'nats' as const,
    processes: 'per-stage' as const,
    natsUrl: server().url,
    threads: 1,
    maxRestarts: 3,
    stateEvery,
  });
  let faultFree = '';

  it('a fault-free run keeps every stage state at the launcher, off the reports', async () => {
    const r = await train(gpt('recfree', 5), setup());
    faultFree = r.param_checksum;
    assert.deepEqual(r.recoveries, []);
    // Four flushes of four stages send their state; the last one's rides in the report (for the checksum).
    assert.equal(r.kept_state?.messages, 16);
    console.log(`      (kept state: ${r.kept_state?.bytes} bytes over ${r.kept_state?.messages} messages)`);
  });

  // SIGKILL: states every 2 flushes (after iterations 1 and 3), killed early in iteration 3
  // (a tenth of an iteration in: half could land after a short iteration 3 ended), so
  // iterations 2 and 3 are replayed. SIGSTOP: a state every flush, stopped mid-iteration 2.
  for (const [fault, every, after, fraction] of [
    ['SIGKILL', 2, 2, 0.1],
    ['SIGSTOP', 1, 1, 0.5],
  ] as const)
    it(`a stage process ${fault === 'SIGKILL' ? 'killed' : 'stopped past the heartbeat timeout'} mid-iteration is restarted and the iterations since its last state (--state-every ${every}) replayed to the fault-free checksum`, async () => {
      const job = `rec${fault.toLowerCase()}`;
      const f = injectFault(job, 2, fault, after, fraction);
      try {
        const r = await train(gpt(job, 5), setup(every), { onIteration: f.onIteration });
        assert.ok(f.at() > 0, 'the fault was injected');
        assert.equal(r.param_checksum, faultFree || r.param_checksum);
        assert.ok(faultFree, 'the fault-free run ran first');
        assert.equal(r.recoveries?.length, 1, JSON.stringify(r.recoveries));
        const rec = r.recoveries![0];
        assert.match(rec.failed ?? '', new RegExp(`^${job}-stage2-`));
        assert.deepEqual(rec.stages, [2]);
        assert.match(rec.reason, fault === 'SIGKILL' ? /signal SIGKILL/ : /sent no heartbeat for \d+ ms/);
        assert.equal(rec.iteration, after + 1, JSON.stringify(rec));
        assert.equal(rec.resumed_from, 2, JSON.stringify(rec));
        // Every 2: the four states of iteration 1, then the replay's of iteration 3 (a stage
        // past the killed one may have sent its own before the kill): 8 to 11, not one a flush.
        const m = r.kept_state?.messages ?? 0;
        if (every === 2) assert.ok(m >= 8 && m < 12, JSON.stringify(r.kept_state));
        const detected = rec.detected_at - f.at();
        console.log(
          `      (${fault}: detected after ${detected} ms, training resumed ${rec.recovery_ms} ms later, ${rec.iterations_replayed} iteration(s) replayed)`,
        );
        assert.ok(detected >= 0 && detected < (fault === 'SIGKILL' ? 1000 : 3500), `detected after ${detected} ms`);
        assert.ok(rec.recovery_ms > 0 && rec.resumed_at > rec.detected_at);
        assert.ok(!r.summary.pids.includes(f.pid()), 'the lost process was replaced');
      } finally {
        f.cleanup();
      }
    });

  it('the nats-server killed mid-iteration 2 and started again 1 s later, no states kept (--state-every 0): every client reconnects and the job is replayed from its start to the fault-free checksum', async () => {
    const f = injectServerRestart(await startNatsServer(), 1);
    try {
      const r = await train(
        gpt('recbroker', 5),
        { ...setup(0), natsUrl: f.server().url },
        { onIteration: f.onIteration },
      );
      await f.restarted();
      assert.ok(f.at() > 0, 'the server was killed');
      assert.ok(faultFree, 'the fault-free run ran first');
      assert.equal(r.param_checksum, faultFree);
      assert.equal(r.recoveries?.length, 1, JSON.stringify(r.recoveries));
      const rec = r.recoveries![0];
      assert.equal(rec.failed, null);
      assert.deepEqual(rec.stages, []);
      assert.match(rec.reason, /lost the connection to NATS/);
      assert.equal(rec.resumed_from, 0, JSON.stringify(rec));
      assert.equal(rec.iterations_replayed, rec.iteration + 1, JSON.stringify(rec));
      assert.equal(r.kept_state?.messages, 0, JSON.stringify(r.kept_state));
      const detected = rec.detected_at - f.at();
      console.log(
        `      (nats-server restart: detected after ${detected} ms, training resumed ${rec.recovery_ms} ms later, ${rec.iterations_replayed} iteration(s) replayed)`,
      );
      assert.ok(detected >= 0 && detected < 1000, `detected after ${detected} ms`);
      assert.ok(rec.recovery_ms > 0 && rec.resumed_at > rec.detected_at);
    } finally {
      await f.restarted().catch(() => {});
      await f.server().stop();
    }
  });

  it('run and train take --max-restarts (default 0 and 3, printed in the job-file form) and refuse one out of 0-1000 with exit 2', async () => {
    for (const [cmd, n] of [
      ['run', 0],
      ['train', 3],
    ] as const) {
      const printed = await batonInProcess(cmd, '--print-config');
      assert.equal(printed.code, 0, printed.err);
      assert.match(printed.out, new RegExp(`"max_restarts": ${n}\\b`));
      const bad = await batonInProcess(cmd, '--max-restarts', '1001');
      assert.equal(bad.code, 2);
      assert.match(bad.err, new RegExp(`${cmd}: --max-restarts must be an integer from 0 to 1000, got 1001`));
    }
  });

  it('train takes --state-every (default 8, printed in the job-file form), refuses a negative one and one with --mode async, and --snapshot-every without it, naming the other', async () => {
    const printed = await batonInProcess('train', '--print-config');
    assert.equal(printed.code, 0, printed.err);
    assert.match(printed.out, /"state_every": 8\b/);
    const refused = [
      [['--state-every', '-1'], /train: --state-every must be an integer >= 0, got -1/],
      [
        ['--mode', 'async', '--state-every', '2'],
        /--state-every sets how often sync stages keep state; .*--snapshot-every N updates/,
      ],
      [
        ['--snapshot-every', '2'],
        /--snapshot-every sets the asynchronous parameter stores; add --mode async \(sync recovery keeps state every --state-every N flushes\)/,
      ],
    ] as const;
    for (const [args, want] of refused) {
      const r = await batonInProcess('train', ...args);
      assert.equal(r.code, 2, r.err);
      assert.match(r.err, want);
    }
  });

  it('fails naming every failure once they outnumber --max-restarts (emulated stages replay as they are)', async () => {
    const cfg = resolveConfig({ job: 'recmax', stages: 4, microbatches: 4, iterations: 400 });
    const kills: number[] = [];
    const kill = (rec: IterationRecord) => {
      if (rec.iteration % 20 !== 5 || kills.length >= 2) return;
      const pid = stageProcessPid('recmax', kills.length + 1);
      kills.push(pid);
      process.kill(pid, 'SIGKILL');
    };
    const err = await runOnce(cfg, { ...setup(), maxRestarts: 1, onIteration: kill }).then(
      (r) => new Error(`ran to the end: ${JSON.stringify((r.result as DistributedResult).recoveries)}`),
      (e: Error) => e,
    );
    assert.ok(err instanceof RestartsExhaustedError, err.message);
    assert.match(err.message, /2 failure\(s\), more than --max-restarts 1 allows/);
    assert.match(err.message, new RegExp(`recmax-stage1-.*pid ${kills[0]}.*recmax-stage2-.*pid ${kills[1]}`));
  });
});
