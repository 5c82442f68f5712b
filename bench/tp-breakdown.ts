// Benchmark of tensor-parallel groups on the virtual clock (run: npm run bench -- tp).
// Measured in one run, side by side, with the paper's jitter and --rank-jitter's model of
// the ranks' message delays (shared by default: a group shares each message's network
// delay, plus a small per-rank part; independent: each rank draws it whole):
// RQ2 (RRFP Table 3): multimodal, PP = 16, M = 32, TP ∈ {1, 2, 4}: per policy (binding
// 1f1b, bf) the seconds per iteration and the shares of compute, blocking and TP
// coordination of the mean stage actor (rank); RQ1 (Table 1's grid): TP ∈ {1, 2} ×
// PP ∈ {8, 16} × {llm (M = 64), multimodal (M = 192)}: bf's and bfw's speedup over binding
// 1f1b, at buffer limit 32 and at depth (P − s, 1F1B's own in-flight), with each run's peak
// in-flight forwards. Emulated TP: a rank computes 1/T of its stage, then all-reduces the
// activation (ring cost from the profile); a coordination round costs one small message.

import { resolveConfig, JobConfig } from '../job/config';
import { runJob, summarize } from '../job/run-local';
import { formatTable } from '../cli/table';
import { benchMain } from './bench-cli';
import { BufferLimit } from '../policies/backpressure';
import { RANK_JITTER_MODES, RankJitter } from '../models/lane-durations';

type Opts = { iterations: number; seed: number; rankJitter: RankJitter };

async function sim(c: Partial<JobConfig>) {
  return summarize(await runJob(resolveConfig({ jitter: 'paper', ...c }), { clock: 'virtual' }));
}

const pct = (x: number) => `${(100 * x).toFixed(2)}%`;
const sec = (ms: number) => (ms / 1000).toFixed(3);

export async function rq2(o: Opts) {
  const rows: Record<string, unknown>[] = [];
  for (const tp of [1, 2, 4])
    for (const policy of ['1f1b', 'bf']) {
      const s = await sim({ profile: 'multimodal', stages: 16, microbatches: 32, tp, policy, ...o });
      // At TP = 1 there are no lanes: the mean stage's busy and wait time give the same split.
      const b = s.breakdown ?? {
        compute_ms: s.makespan_ms * (1 - s.bubble_fraction),
        blocking_ms: s.makespan_ms * s.bubble_fraction,
        tp_coordination_ms: 0,
      };
      rows.push({
        tp,
        policy,
        iteration_ms: s.makespan_ms,
        compute_ms: b.compute_ms,
        blocking_ms: b.blocking_ms,
        tp_coordination_ms: b.tp_coordination_ms,
        compute_share: b.compute_ms / s.makespan_ms,
        blocking_share: b.blocking_ms / s.makespan_ms,
        tp_coordination_share: b.tp_coordination_ms / s.makespan_ms,
        deferrals: s.deferrals ?? 0,
      });
    }
  return rows;
}

export async function rq1(o: Opts) {
  const rows: Record<string, unknown>[] = [];
  for (const [profile, M] of [
    ['llm', 64],
    ['multimodal', 192],
  ] as const)
    for (const tp of [1, 2])
      for (const P of [8, 16]) {
        const base = await sim({ profile, stages: P, microbatches: M, tp, policy: '1f1b', ...o });
        for (const bufferLimit of [32, 'depth'] as BufferLimit[])
          for (const policy of ['bf', 'bfw']) {
            const s = await sim({ profile, stages: P, microbatches: M, tp, policy, bufferLimit, ...o });
            rows.push({
              profile,
              tp,
              stages: P,
              buffer_limit: bufferLimit,
              policy,
              makespan_ms: s.makespan_ms,
              speedup_vs_1f1b: base.makespan_ms / s.makespan_ms,
              peak_inflight: Math.max(...s.peak_inflight),
              peak_inflight_1f1b: Math.max(...base.peak_inflight),
              tp_coordination_share: s.breakdown?.tp_coordination_share ?? 0,
            });
          }
      }
  return rows;
}

if (require.main === module)
  benchMain(
    'tp',
    'tensor-parallel groups on the virtual clock: the RQ2 breakdown (multimodal, PP=16, TP 1/2/4) and the RQ1 grid (TP 1/2 x PP 8/16 x llm/multimodal: bf, bfw over binding 1f1b at limit 32 and depth)',
    [
      { name: 'iterations', type: 'int', metavar: 'I', help: 'iterations per run', default: 2 },
      { name: 'seed', type: 'int', metavar: 'S', help: 'seed of the realized durations', default: 0 },
      {
        name: 'rank-jitter',
        type: 'string',
        help: "the ranks' message delays: shared (a group shares each message's delay) or independent",
        choices: RANK_JITTER_MODES,
        default: 'shared',
      },
    ],
    async (flags) => {
      const o = {
        iterations: flags.iterations as number,
        seed: flags.seed as number,
        rankJitter: flags.rankJitter as RankJitter,
      };
      const t0 = performance.now();
      const breakdown = await rq2(o);
      const grid = await rq1(o);
      const wall_s = (performance.now() - t0) / 1000;
      if (flags.json) return { rank_jitter: o.rankJitter, rq2: breakdown, rq1: grid, wall_s };
      const t2 = formatTable(
        [
          'TP',
          'policy',
          'iteration s',
          'compute s',
          'blocking s',
          'TP coord s',
          'compute',
          'blocking',
          'TP coord',
          'deferrals',
        ],
        breakdown.map((r) => [
          String(r.tp),
          String(r.policy),
          sec(r.iteration_ms as number),
          sec(r.compute_ms as number),
          sec(r.blocking_ms as number),
          sec(r.tp_coordination_ms as number),
          pct(r.compute_share as number),
          pct(r.blocking_share as number),
          pct(r.tp_coordination_share as number),
          String(r.deferrals),
        ]),
      );
      const t1 = formatTable(
        ['profile', 'TP', 'PP', 'limit', 'policy', 'ms', 'speedup vs 1f1b', 'peak in-flight', '1f1b peak', 'TP coord'],
        grid.map((r) => [
          String(r.profile),
          String(r.tp),
          String(r.stages),
          String(r.buffer_limit),
          String(r.policy),
          (r.makespan_ms as number).toFixed(1),
          `${(r.speedup_vs_1f1b as number).toFixed(2)}x`,
          String(r.peak_inflight),
          String(r.peak_inflight_1f1b),
          pct(r.tp_coordination_share as number),
        ]),
      );
      const jitter = `paper jitter, rank jitter ${o.rankJitter}`;
      return `RQ2 breakdown (multimodal, PP=16, M=32, ${jitter}; mean stage actor per iteration)\n${t2}\n\nRQ1 grid (${jitter}; speedup over binding 1f1b)\n${t1}\n\nwall ${wall_s.toFixed(1)} s (virtual clock)`;
    },
  );
