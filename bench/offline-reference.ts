// Benchmark of the lower bound and the offline reference (run: npm run bench -- reference).
// Measured in one run, side by side: for P in {8, 16}, profiles llm and multimodal, paper
// jitter, M=64, buffer limits 8, 32 and depth, seeds 0..N-1: the lower bound and the offline
// reference (checks/offline-reference.ts) on bf's realized durations under the limit's
// in-flight caps, and the makespans of bf, bfw and binding 1f1b; per cell the median and
// range over seeds of each, and of bf/offline and offline/bound. bfw runs the split
// backward (its own durations: B less its weight-gradient part, then W) and binding 1f1b
// keeps its own in-flight counts (P - s), so both are compared by makespan only.

import { JobConfig, resolveConfig } from '../job/config';
import { JobResult, runJob, summarize } from '../job/run-local';
import { runReference } from '../job/run-reference';
import { median } from '../checks/stats';
import { BufferLimit } from '../policies/backpressure';
import { formatTable } from '../cli/table';
import { UsageError } from '../cli/args';
import { benchMain, positiveInt } from './bench-cli';

export interface ReferenceBenchOptions {
  stages?: number[];
  profiles?: string[];
  limits?: BufferLimit[];
  seeds?: number;
  microbatches?: number;
}

const COLUMNS = ['bound', 'offline', 'bf', 'bfw', '1f1b', 'bf/offline', 'offline/bound'] as const;
type Column = (typeof COLUMNS)[number];

async function run(c: Partial<JobConfig>): Promise<JobResult> {
  return runJob(resolveConfig(c), { clock: 'virtual' });
}

export async function benchOfflineReference(o: ReferenceBenchOptions = {}) {
  const stagesList = o.stages ?? [8, 16];
  const profiles = o.profiles ?? ['llm', 'multimodal'];
  const limits = o.limits ?? [8, 32, 'depth'];
  const seeds = o.seeds ?? 10;
  const M = o.microbatches ?? 64;
  const runs: Record<string, unknown>[] = [];
  const cells: {
    profile: string;
    stages: number;
    limit: BufferLimit;
    values: Record<Column, number[]>;
    terms: Record<string, number>;
  }[] = [];
  const wall0 = performance.now();
  let offlineMs = 0;
  for (const profile of profiles)
    for (const P of stagesList)
      for (const limit of limits) {
        const values = Object.fromEntries(COLUMNS.map((c) => [c, [] as number[]])) as Record<Column, number[]>;
        const terms: Record<string, number> = {};
        for (let seed = 0; seed < seeds; seed++) {
          const base = { stages: P, microbatches: M, profile, jitter: 'paper' as const, bufferLimit: limit, seed };
          const bf = await run({ ...base, policy: 'bf' });
          const t0 = performance.now();
          const ref = runReference(bf, true);
          offlineMs += performance.now() - t0;
          const s = summarize(bf);
          const bfw = summarize(await run({ ...base, policy: 'bfw' }));
          const oneF = summarize(await run({ ...base, policy: '1f1b' }));
          const row: Record<Column, number> = {
            bound: s.lower_bound_ms,
            offline: ref.offline_ms,
            bf: s.makespan_ms,
            bfw: bfw.makespan_ms,
            '1f1b': oneF.makespan_ms,
            'bf/offline': s.makespan_ms / ref.offline_ms,
            'offline/bound': ref.offline_ms / s.lower_bound_ms,
          };
          for (const c of COLUMNS) values[c].push(row[c]);
          // The term kind (critical-path, stage, slot), not which stage.
          const kind = s.lower_bound_term.split(' ')[0];
          terms[kind] = (terms[kind] ?? 0) + 1;
          runs.push({
            profile,
            stages: P,
            limit,
            seed,
            ...row,
            lower_bound_term: s.lower_bound_term,
            offline_evaluations: ref.offline_evaluations,
          });
        }
        cells.push({ profile, stages: P, limit, values, terms });
      }
  const summary = cells.map((c) => ({
    profile: c.profile,
    stages: c.stages,
    limit: c.limit,
    bound_terms: c.terms,
    ...Object.fromEntries(
      COLUMNS.map((k) => [
        k,
        { median: median(c.values[k]), min: Math.min(...c.values[k]), max: Math.max(...c.values[k]) },
      ]),
    ),
  })) as ({ profile: string; stages: number; limit: BufferLimit; bound_terms: Record<string, number> } & Record<
    Column,
    { median: number; min: number; max: number }
  >)[];
  return { summary, runs, seeds, microbatches: M, wall_ms: performance.now() - wall0, offline_ms_total: offlineMs };
}

export function formatOfflineReferenceBench(r: Awaited<ReturnType<typeof benchOfflineReference>>): string {
  const ms = (x: { median: number; min: number; max: number }) =>
    `${x.median.toFixed(0)} [${x.min.toFixed(0)}-${x.max.toFixed(0)}]`;
  const ratio = (x: { median: number; min: number; max: number }) =>
    `${x.median.toFixed(3)} [${x.min.toFixed(3)}-${x.max.toFixed(3)}]`;
  const table = formatTable(
    ['profile', 'P', 'limit', ...COLUMNS.map((c) => (c.includes('/') ? c : `${c} ms`)), 'bound set by'],
    r.summary.map((x) => [
      x.profile,
      String(x.stages),
      String(x.limit),
      ...COLUMNS.map((c) => (c.includes('/') ? ratio(x[c]) : ms(x[c]))),
      Object.entries(x.bound_terms)
        .map(([k, n]) => `${k} ${n}`)
        .join(', '),
    ]),
    `paper jitter, M=${r.microbatches}, seeds 0-${r.seeds - 1}: median [min-max] over seeds. bound and offline on bf's realized durations under the limit's caps; ` +
      'bf/offline = how far bf is from the clairvoyant reference; offline/bound = what the bound leaves unexplained (the reference is a heuristic, so at most this far from optimal)',
  );
  return `${table}\n\nwall ${(r.wall_ms / 1000).toFixed(0)} s, of which the offline searches ${(r.offline_ms_total / 1000).toFixed(0)} s`;
}

function limitsFlag(v: unknown): BufferLimit[] | undefined {
  if (v === undefined) return undefined;
  return (v as string[]).map((x) => {
    if (x === 'depth') return 'depth';
    const n = Number(x);
    if (!Number.isInteger(n) || n < 1)
      throw new UsageError(`--limits: each limit is a positive integer or depth, got ${JSON.stringify(x)}`);
    return n;
  });
}

if (require.main === module) {
  benchMain(
    'reference',
    'lower bound and offline reference against bf, bfw and binding 1f1b (llm, multimodal; P 8, 16; limits 8, 32, depth; 10 seeds)',
    [
      { name: 'seeds', type: 'int', metavar: 'N', help: 'seeds 0..N-1 per cell (default 10)' },
      { name: 'stages', type: 'list', metavar: 'P1,P2', help: 'pipeline sizes (default 8,16)' },
      { name: 'limits', type: 'list', metavar: 'L1,L2', help: 'buffer limits: integers or depth (default 8,32,depth)' },
    ],
    async (flags) => {
      const stages =
        flags.stages === undefined
          ? undefined
          : (flags.stages as string[]).map((x) => {
              const n = Number(x);
              if (!Number.isInteger(n) || n < 1)
                throw new UsageError(`--stages: each is a positive integer, got ${JSON.stringify(x)}`);
              return n;
            });
      const r = await benchOfflineReference({
        seeds: positiveInt(flags, 'seeds'),
        stages,
        limits: limitsFlag(flags.limits),
      });
      return flags.json ? r : formatOfflineReferenceBench(r);
    },
  );
}
