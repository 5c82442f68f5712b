// Benchmark for real-compute pipelines (run: npm run bench -- train [--iterations N] [--json]).
// Measured in one run, side by side: tokens/s of a char-GPT trained by a 2-stage
// pipeline over NATS (one OS process per stage, M=8) against one process training the
// same model (a single stage, no pipeline) with the same backend; medians over the
// iterations after the first. Also the split of each stage's time between compute,
// waiting and messaging (encode + decode CPU).

import { resolveConfig } from '../actors/config';
import { median } from '../actors/stats';
import { formatTable } from '../cli/table';
import { loadBackend } from '../models/backend';
import { TRAIN_DEFAULTS, TrainConfig, tokensPerMicrobatch } from '../models/train-config';
import { runOnce } from '../cli/run';
import { iterationStats } from '../actors/stats';

export async function benchTrainThroughput(o: { iterations?: number; layers?: number } = {}) {
  const iterations = o.iterations ?? 6;
  const M = 8;
  const t: TrainConfig = { ...TRAIN_DEFAULTS, model: 'gpt', microbatchSize: 16, seq: 64, layers: o.layers ?? 7, width: 128, heads: 4, totalIterations: iterations, valBatches: 1 };
  const tokens = M * tokensPerMicrobatch(t);
  const rate = (makespans: number[]) => median(makespans.slice(1).map((ms) => tokens / (ms / 1000)));
  const cfg = (P: number, job: string) => resolveConfig({ job, stages: P, microbatches: M, iterations, policy: 'bf', profile: 'train', train: t, stallTimeoutMs: 600000 });

  const single = await runOnce(cfg(1, 'tput1'), { transport: 'local', processes: 'single' });
  const piped = await runOnce(cfg(2, 'tput2'), { transport: 'nats', processes: 'per-stage' });
  const singleRate = rate(single.result.records.map((r) => r.makespan));
  const pipedRate = rate(piped.result.records.map((r) => r.makespan));
  const stats = piped.result.records.slice(1).map((r) => iterationStats(r, piped.result.events, 2, 0));
  const split = [0, 1].map((s) => {
    const total = stats.reduce((a, x) => a + x.makespan_ms, 0);
    const compute = stats.reduce((a, x) => a + x.busy_ms[s], 0);
    const messaging = stats.reduce((a, x) => a + x.messaging_ms[s], 0);
    const waiting = stats.reduce((a, x) => a + Object.values(x.wait_ms[s]).reduce((p, q) => p + q, 0), 0);
    return { stage: s, compute: compute / total, waiting: waiting / total, messaging: messaging / total, other: 1 - (compute + waiting + messaging) / total };
  });
  return {
    backend: (await loadBackend()).backend,
    model: `gpt d128 L${t.layers} seq64 B16`, microbatches: M, iterations,
    single_tokens_per_s: singleRate, pipeline_tokens_per_s: pipedRate, speedup: pipedRate / singleRate,
    processes: piped.processes, split,
  };
}

export function formatTrainThroughput(r: Awaited<ReturnType<typeof benchTrainThroughput>>): string {
  const head = formatTable(['setup', 'tokens/s (median)', 'ratio'], [
    ['1 process, 1 stage', r.single_tokens_per_s.toFixed(0), '1.00x'],
    [`P=2 over NATS, ${r.processes} processes`, r.pipeline_tokens_per_s.toFixed(0), `${r.speedup.toFixed(2)}x`],
  ], `backend ${r.backend}; ${r.model}; M=${r.microbatches}; ${r.iterations} iterations, first discarded`);
  const split = formatTable(['stage', 'compute', 'waiting', 'messaging', 'other'], r.split.map((s) =>
    [String(s.stage), `${(100 * s.compute).toFixed(1)}%`, `${(100 * s.waiting).toFixed(1)}%`, `${(100 * s.messaging).toFixed(1)}%`, `${(100 * s.other).toFixed(1)}%`]),
  'share of each pipeline stage\'s time (iterations after the first)');
  return `${head}\n\n${split}`;
}

if (require.main === module) {
  const arg = (name: string) => {
    const i = process.argv.indexOf(`--${name}`);
    return i > 0 ? Number(process.argv[i + 1]) : undefined;
  };
  benchTrainThroughput({ iterations: arg('iterations'), layers: arg('layers') }).then((r) => {
    console.log(process.argv.includes('--json') ? JSON.stringify(r) : formatTrainThroughput(r));
  }, (e) => {
    console.error(e);
    process.exitCode = 1;
  });
}
