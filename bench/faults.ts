// `npm run bench -- faults`: the fault matrix of recovery by replay (job/recovery.ts). A
// sync `train` (GPT, P = 4) over a nats-server of its own, one process per stage, gets one
// fault per run, mid-iteration: SIGKILL of a stage process, SIGSTOP of one (past the 2 s
// heartbeat timeout). Per fault: detected after (ms from the signal to the launcher's
// verdict), recovered after (ms from that to the replay's first iteration), iterations
// replayed, and whether the parameters equal the fault-free run's (param_checksum). Also
// what keeping every stage's state at the launcher costs: its bytes per iteration, and the
// fault-free run's iteration time with and without it (--max-restarts 0 keeps none).
//
// Not covered here: a lost nats-server, lost or duplicated messages, `run` (emulated).

import { TrainOutcome, train } from '../cli/train';
import { formatTable } from '../cli/table';
import { median } from '../checks/stats';
import { benchMain, positiveInt } from './bench-cli';
import { faultedTrainJob, injectFault } from './fault-inject';

const FAULTS = ['SIGKILL', 'SIGSTOP'] as const;

const config = (job: string, iterations: number) => faultedTrainJob(job, iterations);

const setup = (maxRestarts: number) => ({
  transport: 'nats' as const,
  processes: 'per-stage' as const,
  threads: 1,
  maxRestarts,
});

interface FaultRun {
  detected: number;
  recovered: number;
  replayed: number;
  equal: boolean;
}

async function faultRun(
  fault: (typeof FAULTS)[number],
  i: number,
  iterations: number,
  want: string,
): Promise<FaultRun> {
  const job = `faults-${fault.toLowerCase()}-${i}`;
  const f = injectFault(job, 1 + (i % 3), fault, 1);
  try {
    const r = await train(config(job, iterations), setup(3), { onIteration: f.onIteration });
    const rec = r.recoveries?.[0];
    if (!rec || f.at() === 0)
      throw new Error(`${fault} run ${i}: no recovery recorded (${JSON.stringify(r.recoveries)})`);
    return {
      detected: rec.detected_at - f.at(),
      recovered: rec.recovery_ms,
      replayed: rec.iterations_replayed,
      equal: r.param_checksum === want,
    };
  } finally {
    f.cleanup();
  }
}

const meanIteration = (r: TrainOutcome) => median(r.summary.iterations.slice(1).map((it) => it.makespan_ms));
const range = (xs: number[]) =>
  `${median(xs).toFixed(0)} (${Math.min(...xs).toFixed(0)}-${Math.max(...xs).toFixed(0)})`;

benchMain(
  'faults',
  'recovery by replay: SIGKILL and SIGSTOP of a stage process mid-iteration (sync train, GPT, P = 4, over NATS)',
  [
    { name: 'repeats', type: 'int', metavar: 'R', help: 'runs per fault (default 3)' },
    { name: 'iterations', type: 'int', metavar: 'N', help: 'iterations per run (default 6)' },
  ],
  async (flags) => {
    const repeats = positiveInt(flags, 'repeats') ?? 3;
    const iterations = positiveInt(flags, 'iterations') ?? 6;
    const plain = await train(config('faults-plain', iterations), setup(0));
    const kept = await train(config('faults-kept', iterations), setup(3));
    if (plain.param_checksum !== kept.param_checksum) throw new Error('keeping the stages state changed the result');
    const runs: Record<string, FaultRun[]> = {};
    for (const fault of FAULTS) {
      runs[fault] = [];
      for (let i = 0; i < repeats; i++) runs[fault].push(await faultRun(fault, i, iterations, plain.param_checksum));
    }
    const bytesPerIteration = (kept.kept_state?.bytes ?? 0) / Math.max(1, iterations - 1);
    const result = {
      repeats,
      iterations,
      state: {
        bytes_per_iteration: bytesPerIteration,
        iteration_ms_without: meanIteration(plain),
        iteration_ms_with: meanIteration(kept),
      },
      faults: Object.fromEntries(
        FAULTS.map((f) => [
          f,
          {
            detected_ms: runs[f].map((r) => r.detected),
            recovered_ms: runs[f].map((r) => r.recovered),
            replayed: runs[f].map((r) => r.replayed),
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
      runs[f].map((r) => r.replayed).join(','),
      runs[f].every((r) => r.equal) ? 'yes' : 'no',
    ]);
    return [
      formatTable(
        ['fault', 'detected after, ms (median, range)', 'recovered after, ms', 'iterations replayed', 'result equal'],
        rows,
        `${repeats} runs per fault, ${iterations} iterations each; targets: detected <= 2000 ms, recovered <= 5000 ms after detection`,
      ),
      `keeping every stage's state at the launcher: ${(bytesPerIteration / 1e6).toFixed(2)} MB per iteration; median iteration ${meanIteration(plain).toFixed(0)} ms without, ${meanIteration(kept).toFixed(0)} ms with`,
    ].join('\n');
  },
);
