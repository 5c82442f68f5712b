// `npm run bench -- faults`: the fault matrix of recovery by replay (job/recovery.ts). A
// sync `train` (GPT, P = 4), one process per stage, gets one fault per run, half an
// iteration after iteration N ended (N = --state-every: the newest state is iteration N-1's,
// so iterations N and N+1 are replayed):
// SIGKILL of a stage process, SIGSTOP of one (past the 1.8 s heartbeat timeout), the
// nats-server (one the bench started, given by URL) killed and started again 1 s later;
// and a whole run with 1% of stage messages dropped and 1% duplicated (resent on request,
// nothing replayed). An emulated `run` (P = 8) gets the SIGKILL. Per fault: detected after
// (ms from the fault to the launcher's verdict), recovered after (ms from that to the
// replay's first iteration), iterations replayed, and whether the result equals the
// fault-free run's (train: param_checksum; run: every iteration completed and the trace
// validated). N is train's default unless given. Also what keeping every stage's state at the
// launcher costs: its bytes per state, and the fault-free run's mean iteration time without
// it (--max-restarts 0 keeps none), with a state every flush, and every N.

import { TrainOutcome, train } from '../cli/train';
import { runOnce } from '../cli/run-once';
import { formatTable } from '../cli/table';
import { mean, median } from '../checks/stats';
import { UsageError } from '../cli/args';
import { resolveConfig } from '../job/config';
import { parseFaultSpec } from '../transport/fault-spec';
import { startNatsServer } from '../transport/nats-server';
import { benchMain, positiveInt } from './bench-cli';
import type { DistributedResult, RecoveryRecord } from '../job/run-distributed';
import { faultedTrainJob, injectFault, injectServerRestart } from './fault-inject';
import { TRAIN_COMMAND_DEFAULTS } from '../job/defaults';

const FAULTS = ['SIGKILL', 'SIGSTOP', 'nats-server restart', 'drop 1% + dup 1%', 'run P=8 SIGKILL'] as const;
type Fault = (typeof FAULTS)[number];

const config = (job: string, iterations: number) => faultedTrainJob(job, iterations);

/** What every faulted run shares: its length, its --state-every (the fault comes after iteration `every`), the fault-free checksum. */
interface Plan {
  readonly iterations: number;
  readonly every: number;
  readonly want: string;
}

const setup = (maxRestarts: number, every: number) => ({
  transport: 'nats' as const,
  processes: 'per-stage' as const,
  threads: 1,
  maxRestarts,
  stateEvery: every,
});

interface FaultRun {
  detected: number;
  recovered: number;
  replayed: number;
  /** Messages resent on request (the drop/dup run). */
  resent?: number;
  equal: boolean;
}

async function signalRun(fault: 'SIGKILL' | 'SIGSTOP', i: number, p: Plan): Promise<FaultRun> {
  const job = `faults-${fault.toLowerCase()}-${i}`;
  const f = injectFault(job, 1 + (i % 3), fault, p.every);
  try {
    const r = await train(config(job, p.iterations), setup(3, p.every), { onIteration: f.onIteration });
    return recovered(fault, i, r.recoveries, f.at(), r.param_checksum === p.want);
  } finally {
    f.cleanup();
  }
}

async function serverRestartRun(i: number, p: Plan): Promise<FaultRun> {
  const f = injectServerRestart(await startNatsServer(), p.every);
  try {
    const r = await train(
      config(`faults-server-${i}`, p.iterations),
      { ...setup(3, p.every), natsUrl: f.server().url },
      { onIteration: f.onIteration },
    );
    await f.restarted();
    return recovered('nats-server restart', i, r.recoveries, f.at(), r.param_checksum === p.want);
  } finally {
    await f.restarted().catch(() => {});
    await f.server().stop();
  }
}

async function dropDupRun(i: number, p: Plan): Promise<FaultRun> {
  const cfg = {
    ...config(`faults-dropdup-${i}`, p.iterations),
    faults: parseFaultSpec(`drop=0.01,dup=0.01,seed=${i}`, 0),
  };
  const r = await train(cfg, setup(3, p.every));
  // Lost messages are resent on request: nothing to detect as a failure, nothing replayed.
  const resent = (r.summary as { resent?: number }).resent ?? 0;
  if (resent === 0) throw new Error(`drop/dup run ${i}: no message was resent, so none was lost`);
  return {
    detected: NaN,
    recovered: NaN,
    replayed: r.recoveries?.length ?? 0,
    resent,
    equal: r.param_checksum === p.want,
  };
}

async function emulatedRun(i: number, p: Plan): Promise<FaultRun> {
  const job = `faults-run-${i}`;
  const f = injectFault(job, 1 + (i % 6), 'SIGKILL', p.every);
  const cfg = resolveConfig({ job, stages: 8, microbatches: 8, iterations: p.iterations, profile: 'llm' });
  try {
    const r = await runOnce(cfg, { ...setup(3, p.every), onIteration: f.onIteration });
    const all = r.result.records.length === cfg.warmupIterations + cfg.iterations;
    return recovered('run P=8 SIGKILL', i, (r.result as DistributedResult).recoveries, f.at(), all);
  } finally {
    f.cleanup();
  }
}

function recovered(
  fault: Fault,
  i: number,
  recoveries: readonly RecoveryRecord[] | undefined,
  at: number,
  equal: boolean,
): FaultRun {
  const rec = recoveries?.[0];
  if (!rec || at === 0) throw new Error(`${fault} run ${i}: no recovery recorded (${JSON.stringify(recoveries)})`);
  return { detected: rec.detected_at - at, recovered: rec.recovery_ms, replayed: rec.iterations_replayed, equal };
}

function faultRun(fault: Fault, i: number, p: Plan): Promise<FaultRun> {
  if (fault === 'SIGKILL' || fault === 'SIGSTOP') return signalRun(fault, i, p);
  if (fault === 'nats-server restart') return serverRestartRun(i, p);
  if (fault === 'drop 1% + dup 1%') return dropDupRun(i, p);
  return emulatedRun(i, p);
}

/** The mean of the timed iterations (the first is not): a state every N flushes costs what it costs on average. */
const meanIteration = (r: TrainOutcome) => mean(r.summary.iterations.slice(1).map((it) => it.makespan_ms));
const range = (xs: number[]) =>
  xs.every((x) => Number.isNaN(x))
    ? 'none (resent on request)'
    : `${median(xs).toFixed(0)} (${Math.min(...xs).toFixed(0)}-${Math.max(...xs).toFixed(0)})`;

benchMain(
  'faults',
  'recovery by replay: SIGKILL and SIGSTOP of a stage process, the nats-server restarted, 1% drop + 1% duplicates (sync train, GPT, P = 4, over NATS), SIGKILL in an emulated run (P = 8)',
  [
    { name: 'repeats', type: 'int', metavar: 'R', help: 'runs per fault (default 3)' },
    { name: 'iterations', type: 'int', metavar: 'N', help: 'iterations per run (default 2 N + 2 for --state-every N)' },
    {
      name: 'state-every',
      type: 'int',
      metavar: 'N',
      help: `the faulted runs' --state-every (default ${TRAIN_COMMAND_DEFAULTS.stateEvery}, train's)`,
    },
  ],
  async (flags) => {
    const repeats = positiveInt(flags, 'repeats') ?? 3;
    const stateEvery = positiveInt(flags, 'state-every') ?? TRAIN_COMMAND_DEFAULTS.stateEvery;
    const iterations = positiveInt(flags, 'iterations') ?? 2 * stateEvery + 2;
    if (iterations < stateEvery + 2)
      throw new UsageError(
        `--iterations must be at least --state-every + 2 (the fault comes after iteration ${stateEvery}), got ${iterations}`,
      );
    const plain = await train(config('faults-plain', iterations), setup(0, stateEvery));
    const kept = await train(config('faults-kept', iterations), setup(3, 1));
    const keptEvery = await train(config('faults-kept-n', iterations), setup(3, stateEvery));
    for (const r of [kept, keptEvery])
      if (plain.param_checksum !== r.param_checksum) throw new Error('keeping the stages state changed the result');
    const runs: Record<string, FaultRun[]> = {};
    for (const fault of FAULTS) {
      runs[fault] = [];
      for (let i = 0; i < repeats; i++)
        runs[fault].push(await faultRun(fault, i, { iterations, every: stateEvery, want: plain.param_checksum }));
    }
    const bytesPerState = (kept.kept_state?.bytes ?? 0) / Math.max(1, iterations - 1);
    const result = {
      repeats,
      iterations,
      state_every: stateEvery,
      state: {
        bytes_per_state: bytesPerState,
        iteration_ms_without: meanIteration(plain),
        iteration_ms_every_flush: meanIteration(kept),
        iteration_ms_every_n: meanIteration(keptEvery),
      },
      faults: Object.fromEntries(
        FAULTS.map((f) => [
          f,
          {
            detected_ms: runs[f].map((r) => (Number.isNaN(r.detected) ? null : r.detected)),
            recovered_ms: runs[f].map((r) => (Number.isNaN(r.recovered) ? null : r.recovered)),
            replayed: runs[f].map((r) => r.replayed),
            resent: runs[f].map((r) => r.resent ?? 0),
            equal: runs[f].every((r) => r.equal),
          },
        ]),
      ),
    };
    if (flags.json) return result;
    const rows = FAULTS.map((f) => [
      f,
      range(runs[f].map((r) => r.detected)),
      range(runs[f].map((r) => r.recovered)),
      runs[f].map((r) => (r.resent ? `${r.replayed} (${r.resent} resent)` : r.replayed)).join(', '),
      runs[f].every((r) => r.equal) ? 'yes' : 'no',
    ]);
    return [
      formatTable(
        ['fault', 'detected after, ms (median, range)', 'recovered after, ms', 'iterations replayed', 'result equal'],
        rows,
        `${repeats} runs per fault, ${iterations} iterations each, a state every ${stateEvery} flushes; targets: detected <= 2000 ms, recovered <= 5000 ms after detection; result equal: train's param_checksum as the fault-free run's, run's iterations all completed and validated`,
      ),
      `keeping every stage's state at the launcher: ${(bytesPerState / 1e6).toFixed(2)} MB per state; mean iteration ${meanIteration(plain).toFixed(0)} ms without, ${meanIteration(kept).toFixed(0)} ms with a state every flush, ${meanIteration(keptEvery).toFixed(0)} ms every ${stateEvery}`,
    ].join('\n');
  },
);
