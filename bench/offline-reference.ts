// Benchmark of the lower bound and the offline reference (run: npm run bench -- reference).
// Measured in one run, side by side: for P in {8, 16}, profiles llm and multimodal, paper
// jitter, M=64, buffer limits 8, 32 and depth, seeds 0..N-1: the lower bound and the offline
// reference (checks/offline-reference.ts) on bf's realized durations under the limit's
// in-flight caps, and the makespans of bf, bfw and binding 1f1b; per cell the median and
// range over seeds of each, and of bf/offline and offline/bound. bfw runs the split
// backward (its own durations: B less its weight-gradient part, then W) and binding 1f1b
// keeps its own in-flight counts (P - s), so both are compared by makespan only.
// With --relax S (a stage list such as 1-7), each run's offline search also runs on the same
// instance with those stages made free (checks/offline-relax.ts), in two more columns: how
// far the search lands from the relaxed instance's bound once those stages' queueing is gone.

import { JobConfig, resolveConfig } from '../job/config';
import { JobResult, runJob, summarize } from '../job/run-local';
import { runReference } from '../job/run-reference';
import { offlineReference } from '../checks/offline-reference';
import { freeStages, parseStages } from '../checks/offline-relax';
import { measuredDurations } from '../checks/measured';
import { DurationModel } from '../models/durations';
import { lowerBound } from '../checks/lower-bound';
import { inflightCaps } from '../checks/slot-bound';
import { Spread, mean, spread } from '../checks/stats';
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
  /** Stages to free in a second offline search per run (checks/offline-relax.ts), as a list like "1-7". */
  relax?: string;
}

const COLUMNS = ['bound', 'offline', 'bf', 'bfw', '1f1b', 'bf/offline', 'offline/bound'] as const;
const RELAX_COLUMNS = ['relaxed', 'relaxed/bound'] as const;
type Column = (typeof COLUMNS)[number] | (typeof RELAX_COLUMNS)[number];

async function run(c: Partial<JobConfig>): Promise<JobResult> {
  return runJob(resolveConfig(c), { clock: 'virtual' });
}

export async function benchOfflineReference(o: ReferenceBenchOptions = {}) {
  const stagesList = o.stages ?? [8, 16];
  const profiles = o.profiles ?? ['llm', 'multimodal'];
  const limits = o.limits ?? [8, 32, 'depth'];
  const seeds = o.seeds ?? 10;
  const M = o.microbatches ?? 64;
  const columns: readonly Column[] = o.relax ? [...COLUMNS, ...RELAX_COLUMNS] : COLUMNS;
  // Checked before any run: the freed stages of each pipeline size.
  const free = new Map(stagesList.map((P) => [P, o.relax ? parseStages(o.relax, P) : undefined]));
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
        const values = Object.fromEntries(columns.map((c) => [c, [] as number[]])) as Record<Column, number[]>;
        const terms: Record<string, number> = {};
        for (let seed = 0; seed < seeds; seed++) {
          const base = { stages: P, microbatches: M, profile, jitter: 'paper' as const, bufferLimit: limit, seed };
          const m = await measureSeed(base, free.get(P));
          offlineMs += m.offlineMs;
          process.stderr.write(
            `${((performance.now() - wall0) / 60000).toFixed(1)} min: ${profile} P=${P} limit ${limit} seed ${seed + 1}/${seeds}: ` +
              `bound ${m.row.bound?.toFixed(0)} ms, offline ${m.row.offline?.toFixed(0)} ms (${(m.offlineMs / 1000).toFixed(1)} s of search)\n`,
          );
          for (const c of columns) values[c].push(m.row[c] ?? NaN);
          // The term kind (critical-path, stage, slot), not which stage.
          const kind = m.term.split(' ')[0];
          terms[kind] = (terms[kind] ?? 0) + 1;
          runs.push({
            profile,
            stages: P,
            limit,
            seed,
            ...m.row,
            lower_bound_term: m.term,
            offline_evaluations: m.evaluations,
          });
        }
        cells.push({ profile, stages: P, limit, values, terms });
      }
  const summary = cells.map((c) => ({
    profile: c.profile,
    stages: c.stages,
    limit: c.limit,
    bound_terms: c.terms,
    ...Object.fromEntries(columns.map((k) => [k, spread(c.values[k])])),
  })) as ({ profile: string; stages: number; limit: BufferLimit; bound_terms: Record<string, number> } & Record<
    Column,
    Spread
  >)[];
  return {
    summary,
    runs,
    seeds,
    microbatches: M,
    columns,
    relax: o.relax,
    wall_ms: performance.now() - wall0,
    offline_ms_total: offlineMs,
  };
}

/** One seed of one cell: bf, its bound and offline reference, bfw and binding 1f1b, and the relaxation if asked. */
async function measureSeed(base: Partial<JobConfig>, free: number[] | undefined) {
  const bf = await run({ ...base, policy: 'bf' });
  const t0 = performance.now();
  const ref = runReference(bf, true);
  const offlineMs = performance.now() - t0;
  const s = summarize(bf);
  const bfw = summarize(await run({ ...base, policy: 'bfw' }));
  const oneF = summarize(await run({ ...base, policy: '1f1b' }));
  const row: Partial<Record<Column, number>> = {
    bound: s.lower_bound_ms,
    offline: ref.offline_ms,
    bf: s.makespan_ms,
    bfw: bfw.makespan_ms,
    '1f1b': oneF.makespan_ms,
    'bf/offline': s.makespan_ms / ref.offline_ms,
    'offline/bound': ref.offline_ms / s.lower_bound_ms,
  };
  if (free) {
    const x = relaxedOffline(bf, free);
    Object.assign(row, { relaxed: x.relaxed, 'relaxed/bound': x.relaxed / x.bound });
  }
  return { row, term: s.lower_bound_term, evaluations: ref.offline_evaluations, offlineMs };
}

/**
 * The offline search's makespan with `free` made free and the lower bound of that relaxed
 * instance (the same caps), each averaged over the run's measured iterations (as offline_ms).
 */
function relaxedOffline(r: JobResult, free: number[]): { relaxed: number; bound: number } {
  const relaxed = freeStages(r.shape, measuredDurations(r.events, r.shape, true) as unknown as DurationModel, free);
  const caps = inflightCaps(r.policy, r.shape, r.config.bufferLimit);
  const runs = r.iterations.map((i) => ({
    relaxed: offlineReference(r.shape, i.iteration, relaxed, r.config.bufferLimit, { seed: r.config.seed }).makespan,
    bound: lowerBound(r.shape, i.iteration, relaxed, caps).bound,
  }));
  return { relaxed: mean(runs.map((x) => x.relaxed)), bound: mean(runs.map((x) => x.bound)) };
}

export function formatOfflineReferenceBench(r: Awaited<ReturnType<typeof benchOfflineReference>>): string {
  const ms = (x: Spread) => `${x.median.toFixed(0)} [${x.min.toFixed(0)}-${x.max.toFixed(0)}]`;
  const ratio = (x: Spread) => `${x.median.toFixed(3)} [${x.min.toFixed(3)}-${x.max.toFixed(3)}]`;
  const table = formatTable(
    ['profile', 'P', 'limit', ...r.columns.map((c) => (c.includes('/') ? c : `${c} ms`)), 'bound set by'],
    r.summary.map((x) => [
      x.profile,
      String(x.stages),
      String(x.limit),
      ...r.columns.map((c) => (c.includes('/') ? ratio(x[c]) : ms(x[c]))),
      Object.entries(x.bound_terms)
        .map(([k, n]) => `${k} ${n}`)
        .join(', '),
    ]),
    `paper jitter, M=${r.microbatches}, seeds 0-${r.seeds - 1}: median [min-max] over seeds. bound and offline on bf's realized durations under the limit's caps; ` +
      'bf/offline = how far bf is from the clairvoyant reference; offline/bound = what the bound leaves unexplained (the reference is a heuristic, so at most this far from optimal)' +
      (r.relax
        ? `; relaxed = the same search with stages ${r.relax} made free (no queueing there; checks/offline-relax.ts), relaxed/bound its distance to the relaxed instance's own bound (the same but for the freed stages' one-machine terms)`
        : ''),
  );
  return `${table}\n\nwall ${(r.wall_ms / 1000).toFixed(0)} s, of which the offline searches ${(r.offline_ms_total / 1000).toFixed(0)} s`;
}

/** --relax, checked against every pipeline size before anything runs. */
function relaxFlag(v: unknown, stages: number[]): string | undefined {
  if (v === undefined) return undefined;
  try {
    for (const P of stages) parseStages(v as string, P);
  } catch (e) {
    throw new UsageError(`--relax: ${(e as Error).message}`);
  }
  return v as string;
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
      {
        name: 'relax',
        type: 'string',
        metavar: 'S',
        help: 'also search each instance with stages S (e.g. 1-7) made free: columns relaxed and relaxed/bound',
      },
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
        relax: relaxFlag(flags.relax, stages ?? [8, 16]),
      });
      return flags.json ? r : formatOfflineReferenceBench(r);
    },
  );
}
