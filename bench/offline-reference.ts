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
// --jobs N measures N instances at once on worker threads (bench/reference-pool.ts); --svg
// draws the ratios (bench/reference-svg.ts); --from shows a result saved with --json.

import { BufferLimit } from '../policies/backpressure';
import { parseStages } from '../checks/offline-relax';
import { Spread, spread } from '../checks/stats';
import { formatTable } from '../cli/table';
import { ParsedFlags, UsageError } from '../cli/args';
import { checkOutputFile } from '../cli/output-paths';
import { writeFileSync } from 'fs';
import { readSavedReference } from './reference-saved';
import { ReferenceRun, referenceSvg } from './reference-svg';
import { benchMain, positiveInt } from './bench-cli';
import { COLUMNS, Column, RELAX_COLUMNS, SeedTask } from './reference-seed';
import { measureAll } from './reference-pool';

export interface ReferenceBenchOptions {
  stages?: number[];
  profiles?: string[];
  limits?: BufferLimit[];
  seeds?: number;
  microbatches?: number;
  /** Stages to free in a second offline search per run (checks/offline-relax.ts), as a list like "1-7". */
  relax?: string;
  /** Instances measured at once, each on its own thread (default 1: in this thread). */
  jobs?: number;
  /** Where each finished instance's line goes (default: stderr). */
  progress?: (line: string) => void;
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
  const cells: { profile: string; stages: number; limit: BufferLimit; tasks: SeedTask[] }[] = [];
  for (const profile of profiles)
    for (const P of stagesList)
      for (const limit of limits) {
        const tasks = Array.from({ length: seeds }, (_, seed) => ({
          base: { stages: P, microbatches: M, profile, jitter: 'paper' as const, bufferLimit: limit, seed },
          free: free.get(P),
        }));
        cells.push({ profile, stages: P, limit, tasks });
      }
  const tasks = cells.flatMap((c) => c.tasks);
  const wall0 = performance.now();
  let finished = 0;
  const measures = await measureAll(tasks, o.jobs ?? 1, (i, m) => {
    const b = tasks[i].base;
    (o.progress ?? ((line) => process.stderr.write(`${line}\n`)))(
      `${((performance.now() - wall0) / 60000).toFixed(1)} min, ${++finished}/${tasks.length}: ` +
        `${b.profile} P=${b.stages} limit ${b.bufferLimit} seed ${b.seed}: ` +
        `bound ${m.row.bound?.toFixed(0)} ms, offline ${m.row.offline?.toFixed(0)} ms (${(m.offlineMs / 1000).toFixed(1)} s of search)`,
    );
  });
  const runs = measures.map((m, i) => ({
    profile: tasks[i].base.profile,
    stages: tasks[i].base.stages,
    limit: tasks[i].base.bufferLimit,
    seed: tasks[i].base.seed,
    ...m.row,
    lower_bound_term: m.term,
    offline_evaluations: m.evaluations,
  }));
  let at = 0;
  const measured = cells.map((c) => {
    const mine = measures.slice(at, (at += c.tasks.length));
    const values = Object.fromEntries(columns.map((k) => [k, mine.map((m) => m.row[k] ?? NaN)])) as Record<
      Column,
      number[]
    >;
    // The term kind (critical-path, stage, slot), not which stage.
    const terms: Record<string, number> = {};
    for (const m of mine) terms[m.term.split(' ')[0]] = (terms[m.term.split(' ')[0]] ?? 0) + 1;
    return { ...c, values, terms };
  });
  const summary = measured.map((c) => ({
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
    jobs: o.jobs ?? 1,
    offline_ms_total: measures.reduce((t, m) => t + m.offlineMs, 0),
  };
}

export type ReferenceBenchResult = Awaited<ReturnType<typeof benchOfflineReference>>;

export function formatOfflineReferenceBench(r: ReferenceBenchResult): string {
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
  return `${table}\n\nwall ${(r.wall_ms / 1000).toFixed(0)} s on ${r.jobs} thread${r.jobs === 1 ? '' : 's'}; the offline searches ${(r.offline_ms_total / 1000).toFixed(0)} s in all`;
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

/** The run the flags ask for. */
function runFromFlags(flags: ParsedFlags): Promise<ReferenceBenchResult> {
  const stages =
    flags.stages === undefined
      ? undefined
      : (flags.stages as string[]).map((x) => {
          const n = Number(x);
          if (!Number.isInteger(n) || n < 1)
            throw new UsageError(`--stages: each is a positive integer, got ${JSON.stringify(x)}`);
          return n;
        });
  return benchOfflineReference({
    seeds: positiveInt(flags, 'seeds'),
    stages,
    limits: limitsFlag(flags.limits),
    relax: relaxFlag(flags.relax, stages ?? [8, 16]),
    jobs: positiveInt(flags, 'jobs'),
  });
}

/** --from: a saved result, when no flag asks for a run. */
function fromSaved(flags: ParsedFlags): ReferenceBenchResult {
  const running = RUN_FLAGS.filter((f) => flags[f] !== undefined);
  if (running.length)
    throw new UsageError(
      `--from shows a saved result and runs nothing: ${running.map((f) => `--${f}`).join(', ')} cannot be given with it`,
    );
  return readSavedReference(flags.from as string);
}

const RUN_FLAGS = ['seeds', 'stages', 'limits', 'jobs', 'relax'] as const;

function svgRuns(r: ReferenceBenchResult): ReferenceRun[] {
  return r.runs.map((x) => ({
    profile: x.profile as string,
    stages: x.stages as number,
    limit: x.limit as number | string,
    seed: x.seed as number,
    'offline/bound': x['offline/bound'] ?? NaN,
    'bf/offline': x['bf/offline'] ?? NaN,
  }));
}

const svgTitle = (r: ReferenceBenchResult) =>
  `offline reference against the lower bound and bf: paper jitter, M=${r.microbatches}, seeds 0-${r.seeds - 1}`;

if (require.main === module) {
  benchMain(
    'reference',
    'lower bound and offline reference against bf, bfw and binding 1f1b (llm, multimodal; P 8, 16; limits 8, 32, depth; 10 seeds)',
    [
      { name: 'seeds', type: 'int', metavar: 'N', help: 'seeds 0..N-1 per cell (default 10)' },
      { name: 'stages', type: 'list', metavar: 'P1,P2', help: 'pipeline sizes (default 8,16)' },
      { name: 'limits', type: 'list', metavar: 'L1,L2', help: 'buffer limits: integers or depth (default 8,32,depth)' },
      {
        name: 'jobs',
        type: 'int',
        metavar: 'N',
        help: 'instances measured at once, each on its own thread (default 1); the figures do not depend on it',
      },
      {
        name: 'relax',
        type: 'string',
        metavar: 'S',
        help: 'also search each instance with stages S (e.g. 1-7) made free: columns relaxed and relaxed/bound',
      },
      {
        name: 'svg',
        type: 'string',
        metavar: 'FILE',
        help: 'also draw offline/bound and bf/offline per cell, each seed a dot, the median a bar, the 1.10 target marked',
      },
      {
        name: 'from',
        type: 'string',
        metavar: 'FILE',
        help: 'run nothing: show (and with --svg draw) a result saved with npm run -s bench -- reference --json > FILE',
      },
    ],
    async (flags) => {
      const svg = flags.svg as string | undefined;
      if (svg !== undefined) checkOutputFile(svg, '--svg');
      const r = flags.from === undefined ? await runFromFlags(flags) : fromSaved(flags);
      if (svg !== undefined) writeFileSync(svg, referenceSvg(svgRuns(r), svgTitle(r)));
      if (flags.json) return r;
      return `${formatOfflineReferenceBench(r)}${svg === undefined ? '' : `\npicture: ${svg}`}`;
    },
  );
}
