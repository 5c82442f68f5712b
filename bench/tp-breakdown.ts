// Benchmark of tensor-parallel groups on the virtual clock (run: npm run bench -- tp).
// Measured over --seeds seeds, side by side, with the paper's jitter and --rank-jitter's
// model of the ranks' message delays (shared by default: a group shares each message's
// network delay, plus a small per-rank part; independent: each rank draws it whole); each
// cell gives the median and [min–max] over the seeds.
// RQ2 (RRFP Table 3): multimodal, PP = 16, M = 32, TP ∈ {1, 2, 4}: per policy (binding
// 1f1b, bf) the seconds per iteration and the shares of compute, blocking, TP peer wait (a
// rank's proposal waiting for a peer to reach the round) and TP coordination (the
// all-gather's own time) of the mean stage actor (rank); RQ1 (Table 1's grid): TP ∈ {1, 2} ×
// PP ∈ {8, 16} × {llm (M = 64), multimodal (M = 192)}: bf's and bfw's speedup over binding
// 1f1b, at buffer limit 32 and at depth (P − s, 1F1B's own in-flight), with each run's peak
// in-flight forwards. Emulated TP: a rank computes 1/T of its stage, then all-reduces the
// activation (ring cost from the profile); a coordination round costs one small message.

import { resolveConfig, JobConfig } from '../job/config';
import { runJob, summarize } from '../job/run-local';
import { Spread, spread } from '../checks/stats';
import { benchMain, positiveInt } from './bench-cli';
import { BufferLimit } from '../policies/backpressure';
import { RANK_JITTER_MODES, RankJitter } from '../models/lane-durations';
import { rq1Table, rq2Table } from './tp-tables';

export type Opts = { iterations: number; seed: number; seeds: number; rankJitter: RankJitter };

/** A measure over the seeds: its median, range and every seed's value (in seed order). */
interface SeedSpread extends Spread {
  values: number[];
}

const seedSpread = (values: number[]): SeedSpread => ({ ...spread(values), values });

async function sim(o: Opts, seed: number, c: Partial<JobConfig>) {
  const cfg = { jitter: 'paper' as const, iterations: o.iterations, rankJitter: o.rankJitter, seed, ...c };
  return summarize(await runJob(resolveConfig(cfg), { clock: 'virtual' }));
}

const seedsOf = (o: Opts) => Array.from({ length: o.seeds }, (_, i) => o.seed + i);

/** One RQ2 run's seconds per iteration and the mean stage actor's shares of it. */
async function rq2Run(o: Opts, seed: number, tp: number, policy: string) {
  const s = await sim(o, seed, { profile: 'multimodal', stages: 16, microbatches: 32, tp, policy });
  // At TP = 1 there are no lanes: the mean stage's busy and wait time give the same split.
  const b = s.breakdown ?? {
    compute_ms: s.makespan_ms * (1 - s.bubble_fraction),
    blocking_ms: s.makespan_ms * s.bubble_fraction,
    tp_coordination_ms: 0,
    tp_peer_wait_ms: 0,
  };
  const share = (ms: number) => ms / s.makespan_ms;
  return {
    iteration_ms: s.makespan_ms,
    compute_share: share(b.compute_ms),
    blocking_share: share(b.blocking_ms),
    tp_peer_wait_share: share(b.tp_peer_wait_ms),
    tp_coordination_share: share(b.tp_coordination_ms),
    tp_round_share: share(b.tp_peer_wait_ms + b.tp_coordination_ms),
    deferrals: s.deferrals ?? 0,
  };
}

type Run = Record<string, number>;
/** Per measure, its spread over the runs (one per seed). */
const spreads = (runs: Run[]) =>
  Object.fromEntries(Object.keys(runs[0]).map((k) => [k, seedSpread(runs.map((r) => r[k]))])) as Record<
    string,
    SeedSpread
  >;

export async function rq2(o: Opts) {
  const rows: Record<string, unknown>[] = [];
  for (const tp of [1, 2, 4])
    for (const policy of ['1f1b', 'bf']) {
      const runs: Run[] = [];
      for (const seed of seedsOf(o)) runs.push(await rq2Run(o, seed, tp, policy));
      rows.push({ tp, policy, ...spreads(runs) });
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
        const cell = { profile, stages: P, microbatches: M, tp };
        const runs = new Map<string, Run[]>();
        for (const seed of seedsOf(o)) {
          const base = await sim(o, seed, { ...cell, policy: '1f1b' });
          for (const bufferLimit of [32, 'depth'] as BufferLimit[])
            for (const policy of ['bf', 'bfw']) {
              const s = await sim(o, seed, { ...cell, policy, bufferLimit });
              const k = `${bufferLimit}|${policy}`;
              if (!runs.has(k)) runs.set(k, []);
              runs.get(k)!.push({
                makespan_ms: s.makespan_ms,
                speedup_vs_1f1b: base.makespan_ms / s.makespan_ms,
                peak_inflight: Math.max(...s.peak_inflight),
                peak_inflight_1f1b: Math.max(...base.peak_inflight),
                tp_peer_wait_share: s.breakdown?.tp_peer_wait_share ?? 0,
                tp_coordination_share: s.breakdown?.tp_coordination_share ?? 0,
              });
            }
        }
        for (const [k, r] of runs) {
          const [limit, policy] = k.split('|');
          rows.push({ profile, tp, stages: P, buffer_limit: limit, policy, ...spreads(r) });
        }
      }
  return rows;
}

if (require.main === module)
  benchMain(
    'tp',
    'tensor-parallel groups on the virtual clock, median [min-max] over seeds: the RQ2 breakdown (multimodal, PP=16, TP 1/2/4: compute, blocking, TP peer wait, TP coordination) and the RQ1 grid (TP 1/2 x PP 8/16 x llm/multimodal: bf, bfw over binding 1f1b at limit 32 and depth)',
    [
      { name: 'iterations', type: 'int', metavar: 'I', help: 'iterations per run', default: 2 },
      { name: 'seed', type: 'int', metavar: 'S', help: 'seed of the realized durations (the first)', default: 0 },
      { name: 'seeds', type: 'int', metavar: 'N', help: 'seeds S, S+1, … S+N-1 per cell', default: 1 },
      {
        name: 'rank-jitter',
        type: 'string',
        help: "the ranks' message delays: shared (a group shares each message's delay) or independent",
        choices: RANK_JITTER_MODES,
        default: 'shared',
      },
      { name: 'part', type: 'string', help: 'what to run', choices: ['both', 'rq2', 'rq1'], default: 'both' },
    ],
    async (flags) => {
      const o: Opts = {
        iterations: flags.iterations as number,
        seed: flags.seed as number,
        seeds: positiveInt(flags, 'seeds') ?? 1,
        rankJitter: flags.rankJitter as RankJitter,
      };
      const t0 = performance.now();
      const breakdown = flags.part === 'rq1' ? [] : await rq2(o);
      const grid = flags.part === 'rq2' ? [] : await rq1(o);
      const wall_s = (performance.now() - t0) / 1000;
      const seeds = seedsOf(o);
      if (flags.json) return { rank_jitter: o.rankJitter, seeds, rq2: breakdown, rq1: grid, wall_s };
      const what = `paper jitter, rank jitter ${o.rankJitter}, seeds ${seeds.join(',')}: median [min-max]`;
      return [
        ...(breakdown.length
          ? [
              `RQ2 breakdown (multimodal, PP=16, M=32, ${what}; mean stage actor per iteration)`,
              rq2Table(breakdown),
              '',
            ]
          : []),
        ...(grid.length ? [`RQ1 grid (${what}; speedup over binding 1f1b)`, rq1Table(grid), ''] : []),
        `wall ${wall_s.toFixed(1)} s (virtual clock)`,
      ].join('\n');
    },
  );
