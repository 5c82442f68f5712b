// Benchmark for real-compute pipelines (run: npm run bench -- train [--rounds R]
// [--iterations N] [--layers L] [--microbatch-size B] [--buffer-limit N] [--json]). Measured in one run, side by side: tokens/s of a char-GPT
// trained by a 2-stage pipeline over NATS (one OS process per stage, M=8) against one
// process training the same model (a single stage, no pipeline) with the same backend.
// This machine's speed drifts by tens of percent over minutes, so the two setups
// alternate for R rounds; each round gives a ratio, and the figure is the median
// ratio. Within a run, the first iteration (tier-up of the wasm code) is discarded.
// Also the split of each stage's time between compute, waiting, messaging and idle.

import { resolveConfig } from '../actors/config';
import { median } from '../actors/stats';
import { formatTable } from '../cli/table';
import { loadBackend } from '../models/backend';
import { TRAIN_DEFAULTS, TrainConfig, tokensPerMicrobatch } from '../models/train-config';
import { runOnce } from '../cli/run';
import { IterationStats, iterationStats } from '../actors/stats';

export async function benchTrainThroughput(o: { rounds?: number; iterations?: number; layers?: number; microbatchSize?: number; bufferLimit?: number } = {}) {
  const rounds = o.rounds ?? 3;
  // At most 3 forwards in flight per stage: stage 0 holds three microbatches' activations,
  // not eight, and runs measurably faster (less memory traffic); one more than 1F1B's 2
  // lets it fill its wait for the first gradient with a forward.
  const bufferLimit = o.bufferLimit ?? 3;
  const iterations = o.iterations ?? 5;
  const M = 8;
  const t: TrainConfig = { ...TRAIN_DEFAULTS, model: 'gpt', microbatchSize: o.microbatchSize ?? 16, seq: 64, layers: o.layers ?? 8, width: 128, heads: 4, totalIterations: iterations, valBatches: 1 };
  const tokens = M * tokensPerMicrobatch(t);
  const rate = (makespans: number[]) => median(makespans.slice(1).map((ms) => tokens / (ms / 1000)));
  const cfg = (P: number, job: string) => resolveConfig({ job, stages: P, microbatches: M, iterations, policy: 'bf', profile: 'train', train: t, stallTimeoutMs: 600000, bufferLimit });

  const perRound: { single: number; pipeline: number; ratio: number }[] = [];
  const stats: IterationStats[] = [];
  let processes = 0;
  for (let r = 0; r < rounds; r++) {
    const single = await runOnce(cfg(1, `tput1r${r}`), { transport: 'local', processes: 'single' });
    const piped = await runOnce(cfg(2, `tput2r${r}`), { transport: 'nats', processes: 'per-stage' });
    const singleRate = rate(single.result.records.map((x) => x.makespan));
    const pipedRate = rate(piped.result.records.map((x) => x.makespan));
    perRound.push({ single: singleRate, pipeline: pipedRate, ratio: pipedRate / singleRate });
    stats.push(...piped.result.records.slice(1).map((x) => iterationStats(x, piped.result.events, 2, 0)));
    processes = piped.processes;
  }
  const total = stats.reduce((a, x) => a + x.makespan_ms, 0);
  const split = [0, 1].map((s) => {
    const compute = stats.reduce((a, x) => a + x.busy_ms[s], 0);
    const messaging = stats.reduce((a, x) => a + x.messaging_ms[s], 0);
    const waiting = stats.reduce((a, x) => a + Object.values(x.wait_ms[s]).reduce((p, q) => p + q, 0), 0);
    return { stage: s, compute: compute / total, waiting: waiting / total, messaging: messaging / total, idle: 1 - (compute + waiting + messaging) / total };
  });
  return {
    backend: (await loadBackend()).backend,
    model: `gpt d128 L${t.layers} seq64 B${t.microbatchSize}`, microbatches: M, buffer_limit: bufferLimit, iterations, rounds,
    single_tokens_per_s: median(perRound.map((x) => x.single)),
    pipeline_tokens_per_s: median(perRound.map((x) => x.pipeline)),
    speedup: median(perRound.map((x) => x.ratio)),
    rounds_detail: perRound,
    processes, split,
  };
}

export function formatTrainThroughput(r: Awaited<ReturnType<typeof benchTrainThroughput>>): string {
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  const rounds = formatTable(['round', '1 process tokens/s', `P=2 over NATS (${r.processes} processes) tokens/s`, 'ratio'],
    r.rounds_detail.map((x, i) => [String(i + 1), x.single.toFixed(0), x.pipeline.toFixed(0), `${x.ratio.toFixed(2)}x`]),
    `backend ${r.backend}; ${r.model}; M=${r.microbatches}; bf, buffer limit ${r.buffer_limit}; ${r.rounds} alternating rounds of ${r.iterations} iterations, first of each discarded`);
  const split = formatTable(['stage', 'compute', 'waiting', 'messaging', 'idle'], r.split.map((s) =>
    [String(s.stage), pct(s.compute), pct(s.waiting), pct(s.messaging), pct(s.idle)]),
  'share of each pipeline stage\'s time (all measured iterations; idle = before its first task or after its last)');
  return `${rounds}\nmedian: 1 process ${r.single_tokens_per_s.toFixed(0)} tokens/s, pipeline ${r.pipeline_tokens_per_s.toFixed(0)} tokens/s; ratio ${r.speedup.toFixed(2)}x (median of the rounds' ratios; ratio of the medians ${(r.pipeline_tokens_per_s / r.single_tokens_per_s).toFixed(2)}x)\n\n${split}`;
}

if (require.main === module) {
  const arg = (name: string) => {
    const i = process.argv.indexOf(`--${name}`);
    return i > 0 ? Number(process.argv[i + 1]) : undefined;
  };
  benchTrainThroughput({ rounds: arg('rounds'), iterations: arg('iterations'), layers: arg('layers'), microbatchSize: arg('microbatch-size'), bufferLimit: arg('buffer-limit') }).then((r) => {
    console.log(process.argv.includes('--json') ? JSON.stringify(r) : formatTrainThroughput(r));
  }, (e) => {
    console.error(e);
    process.exitCode = 1;
  });
}
