// `baton sim`: the runtime's actors on the virtual clock with emulated compute.

import { JobResult, runJob, summarize } from '../job/run-local';
import { SwapOptions } from '../job/policy-control';
import { SWAP_FLAGS, swapOptionsFromFlags } from './swap-flags';
import { JobConfig } from '../job/config';
import { checkJob } from '../job/wire-stage';
import { CONFIG_FLAG, FlagSpec, PRINT_CONFIG_FLAG, helpText, parseFlags, printedHelp } from './args';
import { JOB_FLAGS, asyncStream, comparedPolicies, jobConfigFromFlags, speedupOver } from './job-flags';
import {
  TRACE_OUTPUT_FLAGS,
  checkTraceOutputs,
  offlineGanttPaths,
  writeComparedTraceFiles,
  writeTraceFiles,
} from './trace-output';
import { jobFileText, withJobFile } from './job-file';
import { JOB_DEFAULTS } from '../job/defaults';
import { warmupFlag, withWarmup } from './warmup-flag';
import { comparedConfig } from './compare-entry';
import { REFERENCE_FLAGS, WithReference, checkReferenceFlags, withReference } from './reference-flag';
import { COLUMNS, resultsTable } from './results-table';

export const SIM_FLAGS: readonly FlagSpec[] = [
  ...JOB_FLAGS,
  ...SWAP_FLAGS,
  {
    name: 'compare',
    type: 'list',
    metavar: 'P1,P2,…',
    help: 'run the same seed under each policy and compare (speedup over the first)',
  },
  ...TRACE_OUTPUT_FLAGS,
  ...REFERENCE_FLAGS,
  warmupFlag(JOB_DEFAULTS.warmupIterations),
  { name: 'json', type: 'bool', help: 'print JSON instead of a table' },
  CONFIG_FLAG,
  PRINT_CONFIG_FLAG,
  { name: 'help', type: 'bool', help: 'show this help' },
];

export const SIM_HELP = helpText(
  'sim',
  'simulate a pipeline on the virtual clock (same actors, emulated compute)',
  'baton sim [--stages P] [--microbatches M] [--chunks V] [--policy NAME] [--profile NAME|FILE] [--jitter none|compute|paper] ' +
    '[--jitter-scale X] [--buffer-limit N|depth] [--seed S] [--iterations I] [--warmup-iterations W] [--compare 1f1b,bf,bf@depth,…] [--reference offline [--reference-anneal N]] [--config FILE] [--json]',
  SIM_FLAGS,
);

export async function simulate(cfg: JobConfig, swaps?: SwapOptions): Promise<JobResult> {
  return runJob(cfg, { clock: 'virtual', swaps });
}

export function compareRows(results: JobResult[]) {
  const base = summarize(results[0]).makespan_ms;
  return results.map((r) => {
    const s = summarize(r);
    return { ...s, binding: r.policy.binding, speedup: speedupOver(base, s.makespan_ms) };
  });
}

export async function simCommand(argv: readonly string[], out: (s: string) => void): Promise<number> {
  const { flags, given } = withJobFile(parseFlags(argv, SIM_FLAGS, 'sim'), 'sim', SIM_FLAGS);
  if (printedHelp(flags, SIM_HELP, out)) return 0;
  const cfg = withWarmup(asyncStream(jobConfigFromFlags(flags)), flags, given, 'sim');
  const compare = comparedPolicies(flags, given, 'sim');
  // Every policy's config is checked before anything runs (or is printed as runnable).
  for (const entry of compare ?? [cfg.policy]) checkJob(comparedConfig(cfg, entry));
  if (flags.printConfig) {
    out(jobFileText(flags, 'sim', SIM_FLAGS));
    return 0;
  }
  const gantt = flags.gantt as string | undefined;
  const offlineCharts = flags.reference === 'offline' && gantt !== undefined;
  checkReferenceFlags(flags);
  checkTraceOutputs('sim', flags.trace as string | undefined, gantt, compare, offlineCharts);
  if (!compare) {
    const r = await simulate(cfg, swapOptionsFromFlags(flags));
    const written = writeTraceFiles(r, flags.trace as string | undefined, gantt);
    const gantts = offlineCharts ? offlineGanttPaths(gantt, ['']) : undefined;
    const [s] = withReference(flags, [summarize(r)], [r], true, { gantts, written });
    out(flags.json ? JSON.stringify(s) : singleTable(s, cfg));
    if (!flags.json) for (const w of written) out(`wrote ${w}`);
    return 0;
  }
  const results: JobResult[] = [];
  for (const entry of compare) results.push(await simulate(comparedConfig(cfg, entry)));
  const written = writeComparedTraceFiles(
    results,
    flags.trace as string | undefined,
    flags.gantt as string | undefined,
    compare,
  );
  const gantts = offlineCharts ? offlineGanttPaths(gantt, compare) : undefined;
  const rows = withReference(flags, compareRows(results), results, true, { gantts, written });
  out(flags.json ? JSON.stringify(rows) : compareTable(rows, cfg));
  if (!flags.json) for (const w of written) out(`wrote ${w}`);
  return 0;
}

/** The table of one run (with the offline columns and the ratio note when the reference was computed). */
function singleTable(s: WithReference<ReturnType<typeof summarize>>, cfg: JobConfig): string {
  return resultsTable(
    [s],
    [COLUMNS.policy, COLUMNS.makespan(2), COLUMNS.peak, COLUMNS.cap, COLUMNS.lowerBound(2), COLUMNS.efficiency],
    [COLUMNS.bubble],
    `P=${s.stages} M=${s.microbatches} V=${s.chunks} profile=${s.profile} jitter=${s.jitter} scale=${cfg.jitterScale} seed=${s.seed} buffer-limit=${s.buffer_limit} iterations=${s.iterations.length} (after ${s.warmup_iterations} warm-up); bound set by ${s.lower_bound_term}`,
  );
}

/** The table of --compare: one row per policy. */
function compareTable(rows: WithReference<ReturnType<typeof compareRows>[number]>[], cfg: JobConfig): string {
  const speedup = {
    head: `speedup vs ${rows[0].policy}`,
    cell: (r: { speedup: number }) => `${r.speedup.toFixed(3)}x`,
  };
  return resultsTable(
    rows,
    [COLUMNS.policy, COLUMNS.limit, COLUMNS.makespan(2), speedup, COLUMNS.peak, COLUMNS.cap, COLUMNS.efficiency],
    [COLUMNS.bubble],
    `P=${cfg.stages} M=${cfg.microbatches} V=${cfg.chunks} profile=${cfg.profile} jitter=${cfg.jitter} scale=${cfg.jitterScale} seed=${cfg.seed} iterations=${cfg.iterations} (after ${cfg.warmupIterations} warm-up)`,
  );
}
