// Benchmark for real-compute pipelines (run: npm run bench -- train [--rounds R (default 5)]
// [--iterations N] [--layers L] [--microbatch-size B] [--buffer-limit N] [--no-ceiling]
// [--json]). Measured in one run, side by side: tokens/s of a char-GPT
// trained by a 2-stage pipeline over NATS (one OS process per stage, M=8) against one
// process training the same model (a single stage, no pipeline) with the same backend.
// This machine's speed drifts by tens of percent over minutes, so the two setups
// alternate for R rounds (one process first in even rounds, the pipeline first in odd
// ones, so a drift within a round favours neither); each round gives a ratio, and the
// figure is the median ratio. Within a run, the first iteration (tier-up of the wasm code) is discarded.
// Also the split of each stage's time between compute, waiting, messaging and idle, and
// (unless --no-ceiling) the machine's ceiling for two processes: two independent
// one-process trainings of the same model run at the same time, in each round. Their
// summed tokens/s over one such training alone (the same child process, measured in the
// same round, before or after the pair in alternate rounds) is what two processes can get
// on this machine at all (they share caches and memory bandwidth); a 2-stage pipeline
// gets less by its bubble. Each of the ceiling's child processes has 1 BLAS thread, as
// each pipeline stage has; the one-process training the pipeline is compared with has
// the machine's cores (its default).

import { resolveConfig } from '../job/config';
import { median } from '../checks/stats';
import { formatTable } from '../cli/table';
import { loadBackend } from '../models/backend';
import { TrainConfig, tokensPerMicrobatch } from '../models/train-config';
import { TRAIN_DEFAULTS } from '../job/defaults';
import { CLI_ENTRY, RunOutcome, runOnce } from '../cli/run';
import { IterationStats, iterationStats } from '../checks/stats';
import { childJson } from './child-json';
import { benchMain, positiveInt } from './bench-cli';
import { inTurn } from './in-turn';
import { UsageError } from '../cli/args';

/** tokens/s of one `baton train` child process (one stage), first iteration discarded. */
async function trainChild(t: TrainConfig, microbatches: number, iterations: number): Promise<number> {
  const args = [
    CLI_ENTRY,
    'train',
    '--model',
    t.model,
    '--stages',
    '1',
    '--microbatches',
    String(microbatches),
    '--microbatch-size',
    String(t.microbatchSize),
    '--seq',
    String(t.seq),
    '--layers',
    String(t.layers),
    '--width',
    String(t.width),
    '--heads',
    String(t.heads),
    '--iterations',
    String(iterations),
    '--val-batches',
    '1',
    '--threads',
    '1',
    '--json',
  ];
  const r = (await childJson(process.execPath, args, 'baton train')) as { iterations?: { makespan_ms: number }[] };
  if (!r || !Array.isArray(r.iterations)) throw new Error('baton train printed no run statistics');
  const tokens = microbatches * tokensPerMicrobatch(t);
  return median(r.iterations.slice(1).map((x) => tokens / (x.makespan_ms / 1000)));
}

/** Which setup runs first in round `r`: one process in even rounds, the pipeline in odd ones. */
export function roundOrder(r: number): readonly ('single' | 'pipeline')[] {
  return inTurn(['single', 'pipeline'] as const, r);
}

/** What the benchmark measures when a flag does not say otherwise. */
export const TRAIN_BENCH_DEFAULTS = {
  rounds: 5,
  iterations: 5,
  layers: 8,
  microbatchSize: 16,
  bufferLimit: 3,
} as const;

/** The bench's model: a GPT deep enough that each of two stages has real work. */
function benchModel(o: { layers?: number; microbatchSize?: number }, iterations: number): TrainConfig {
  return {
    ...TRAIN_DEFAULTS,
    model: 'gpt',
    microbatchSize: o.microbatchSize ?? TRAIN_BENCH_DEFAULTS.microbatchSize,
    seq: 64,
    layers: o.layers ?? TRAIN_BENCH_DEFAULTS.layers,
    width: 128,
    heads: 4,
    totalIterations: iterations,
    valBatches: 1,
  };
}

/** Round `r`'s ceiling: both sides are the same `baton train` child (fresh process, same
 * iterations), not the in-process run: one alone, and two at once, in turn going first. */
async function ceilingOfRound(t: TrainConfig, M: number, iterations: number, r: number) {
  const child = () => trainChild(t, M, Math.min(iterations, 3));
  const pair = () => Promise.all([child(), child()]);
  const [alone, both] =
    r % 2 === 0 ? [await child(), await pair()] : await pair().then(async (b) => [await child(), b] as const);
  const twoSingles = both[0] + both[1];
  return { oneChild: alone, twoSingles, ceiling: twoSingles / alone };
}

/** Each stage's share of the pipeline's iterations: compute, waiting, messaging, idle. */
function stageSplit(stats: readonly IterationStats[]) {
  const total = stats.reduce((a, x) => a + x.makespan_ms, 0);
  return [0, 1].map((s) => {
    const compute = stats.reduce((a, x) => a + x.busy_ms[s], 0);
    const messaging = stats.reduce((a, x) => a + x.messaging_ms[s], 0);
    const waiting = stats.reduce((a, x) => a + Object.values(x.wait_ms[s]).reduce((p, q) => p + q, 0), 0);
    return {
      stage: s,
      compute: compute / total,
      waiting: waiting / total,
      messaging: messaging / total,
      idle: 1 - (compute + waiting + messaging) / total,
    };
  });
}

export async function benchTrainThroughput(
  o: {
    rounds?: number;
    iterations?: number;
    layers?: number;
    microbatchSize?: number;
    bufferLimit?: number;
    ceiling?: boolean;
  } = {},
) {
  const rounds = o.rounds ?? TRAIN_BENCH_DEFAULTS.rounds;
  // At most 3 forwards in flight per stage: stage 0 holds three microbatches' activations,
  // not eight, and runs measurably faster (less memory traffic); one more than 1F1B's 2
  // lets it fill its wait for the first gradient with a forward.
  const bufferLimit = o.bufferLimit ?? TRAIN_BENCH_DEFAULTS.bufferLimit;
  const iterations = o.iterations ?? TRAIN_BENCH_DEFAULTS.iterations;
  const M = 8;
  const t = benchModel(o, iterations);
  const tokens = M * tokensPerMicrobatch(t);
  const rate = (makespans: number[]) => median(makespans.slice(1).map((ms) => tokens / (ms / 1000)));
  const cfg = (P: number, job: string) =>
    resolveConfig({
      job,
      stages: P,
      microbatches: M,
      iterations,
      policy: 'bf',
      profile: 'train',
      train: t,
      stallTimeoutMs: 600000,
      bufferLimit,
    });

  const perRound: {
    single: number;
    pipeline: number;
    ratio: number;
    oneChild?: number;
    twoSingles?: number;
    ceiling?: number;
  }[] = [];
  const stats: IterationStats[] = [];
  let processes = 0;
  for (let r = 0; r < rounds; r++) {
    let single: RunOutcome | undefined;
    let piped: RunOutcome | undefined;
    for (const side of roundOrder(r)) {
      if (side === 'single') single = await runOnce(cfg(1, `tput1r${r}`), { transport: 'local', processes: 'single' });
      else piped = await runOnce(cfg(2, `tput2r${r}`), { transport: 'nats', processes: 'per-stage' });
    }
    if (!single || !piped) throw new Error('unreachable: a round measures both setups');
    const singleRate = rate(single.result.records.map((x) => x.makespan));
    const pipedRate = rate(piped.result.records.map((x) => x.makespan));
    const round: (typeof perRound)[number] = { single: singleRate, pipeline: pipedRate, ratio: pipedRate / singleRate };
    if (o.ceiling !== false) Object.assign(round, await ceilingOfRound(t, M, iterations, r));
    perRound.push(round);
    stats.push(...piped.result.records.slice(1).map((x) => iterationStats(x, piped.result.events, 2, 0)));
    processes = piped.processes;
  }
  const split = stageSplit(stats);
  return {
    backend: (await loadBackend()).backend,
    model: `gpt d128 L${t.layers} seq64 B${t.microbatchSize}`,
    microbatches: M,
    buffer_limit: bufferLimit,
    iterations,
    rounds,
    single_tokens_per_s: median(perRound.map((x) => x.single)),
    pipeline_tokens_per_s: median(perRound.map((x) => x.pipeline)),
    speedup: median(perRound.map((x) => x.ratio)),
    ceiling: o.ceiling === false ? null : median(perRound.map((x) => x.ceiling!)),
    /** Median over the rounds of the pipeline's ratio over the ceiling of its round. */
    of_ceiling: o.ceiling === false ? null : median(perRound.map((x) => x.ratio / x.ceiling!)),
    rounds_detail: perRound,
    processes,
    split,
  };
}

export function formatTrainThroughput(r: Awaited<ReturnType<typeof benchTrainThroughput>>): string {
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  const withCeiling = r.ceiling !== null;
  const rounds = formatTable(
    [
      'round',
      '1 process tokens/s',
      `P=2 over NATS (${r.processes} processes) tokens/s`,
      'ratio',
      ...(withCeiling ? ['1 child process tokens/s', '2 at once tokens/s', 'ceiling'] : []),
    ],
    r.rounds_detail.map((x, i) => [
      String(i + 1),
      x.single.toFixed(0),
      x.pipeline.toFixed(0),
      `${x.ratio.toFixed(2)}x`,
      ...(withCeiling ? [x.oneChild!.toFixed(0), x.twoSingles!.toFixed(0), `${x.ceiling!.toFixed(2)}x`] : []),
    ]),
    `backend ${r.backend}; ${r.model}; M=${r.microbatches}; bf, buffer limit ${r.buffer_limit}; ${r.rounds} alternating rounds of ${r.iterations} iterations, first of each discarded`,
  );
  const split = formatTable(
    ['stage', 'compute', 'waiting', 'messaging', 'idle'],
    r.split.map((s) => [String(s.stage), pct(s.compute), pct(s.waiting), pct(s.messaging), pct(s.idle)]),
    "share of each pipeline stage's time (all measured iterations; idle = before its first task or after its last)",
  );
  const ceiling = withCeiling
    ? `\nceiling: two independent one-process trainings (child processes) at once give ${r.ceiling!.toFixed(2)}x one such child alone (median); the pipeline reaches ${(100 * r.of_ceiling!).toFixed(0)}% of its round's ceiling (median)`
    : '';
  return `${rounds}\nmedian: 1 process ${r.single_tokens_per_s.toFixed(0)} tokens/s, pipeline ${r.pipeline_tokens_per_s.toFixed(0)} tokens/s; ratio ${r.speedup.toFixed(2)}x (median of the rounds' ratios; ratio of the medians ${(r.pipeline_tokens_per_s / r.single_tokens_per_s).toFixed(2)}x)${ceiling}\n\n${split}`;
}

if (require.main === module) {
  benchMain(
    'train',
    "tokens/s of a 2-process pipeline over NATS against one process, alternating rounds, each stage's split of time, the machine's two-process ceiling",
    [
      { name: 'rounds', type: 'int', metavar: 'R', help: 'alternating rounds', default: TRAIN_BENCH_DEFAULTS.rounds },
      {
        name: 'iterations',
        type: 'int',
        metavar: 'N',
        help: 'training iterations per measurement, at least 2 (the first is discarded; the ceiling runs at most 3)',
        default: TRAIN_BENCH_DEFAULTS.iterations,
      },
      {
        name: 'layers',
        type: 'int',
        metavar: 'L',
        help: 'model layers, at least 2',
        default: TRAIN_BENCH_DEFAULTS.layers,
      },
      {
        name: 'microbatch-size',
        type: 'int',
        metavar: 'B',
        help: 'samples per microbatch',
        default: TRAIN_BENCH_DEFAULTS.microbatchSize,
      },
      {
        name: 'buffer-limit',
        type: 'int',
        metavar: 'N',
        help: 'forwards in flight per stage',
        default: TRAIN_BENCH_DEFAULTS.bufferLimit,
      },
      { name: 'no-ceiling', type: 'bool', help: 'skip the two-process ceiling measurement' },
    ],
    async (flags) => {
      const layers = positiveInt(flags, 'layers');
      if (layers !== undefined && layers < 2)
        throw new UsageError(
          `--layers must be at least 2 (the pipeline's 2 stages hold at least one block each), got ${layers}`,
        );
      const iterations = positiveInt(flags, 'iterations');
      if (iterations !== undefined && iterations < 2)
        throw new UsageError(
          `--iterations must be at least 2 (the first of each measurement is discarded), got ${iterations}`,
        );
      const r = await benchTrainThroughput({
        rounds: positiveInt(flags, 'rounds'),
        iterations,
        layers,
        microbatchSize: positiveInt(flags, 'microbatch-size'),
        bufferLimit: positiveInt(flags, 'buffer-limit'),
        ceiling: !flags.noCeiling,
      });
      return flags.json ? r : formatTrainThroughput(r);
    },
  );
}
