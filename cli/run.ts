// `baton run`: a job on the real clock — in this process over the in-process bus, or
// over NATS with one OS process per stage (node agents this command spawns) or with
// node agents a user started (`--nodes`).

import { JobConfig } from '../job/config';
import { summarize } from '../job/run-local';
import { checkJob } from '../job/wire-stage';
import { checkJobName } from '../transport/subjects';
import { UsageError, parseFlags, printedHelp } from './args';
import { comparedPolicies, speedupOver } from './job-flags';
import { comparedConfig, entryLabel } from './compare-entry';
import { reportPath, writeRunReport } from './report/report-write';
import { WithReference, checkReferenceFlags, withReference } from './reference-flag';
import { COLUMNS, resultsTable } from './results-table';
import { warnRejects } from './rejects';
import { checkTraceOutputs, offlineGanttPaths, writeComparedTraceFiles } from './trace-output';
import { jobFileText, withJobFile } from './job-file';
import { RUN_FLAGS, RUN_HELP, runConfigFromFlags } from './run-flags';
import { RunOutcome, RunSetup, runOnce } from './run-once';

export { MAX_LOCAL_STAGE_PROCESSES, RUN_HELP, checkLocalProcesses } from './run-flags';
export { CLI_ENTRY, RunOutcome, RunSetup, distinctProcesses, runOnce } from './run-once';

function summary(o: RunOutcome) {
  return {
    ...summarize(o.result),
    binding: o.result.policy.binding,
    transport: o.transport,
    processes: o.processes,
    pids: o.pids,
  };
}

export async function runCommand(argv: readonly string[], out: (s: string) => void): Promise<number> {
  const { flags, given } = withJobFile(parseFlags(argv, RUN_FLAGS, 'run'), 'run', RUN_FLAGS);
  if (printedHelp(flags, RUN_HELP, out)) return 0;
  const { cfg, setup } = runConfigFromFlags(flags, given);
  const compare = comparedPolicies(flags, given, 'run');
  const policies = compare ?? [cfg.policy];
  const jobOf = jobNamesOf(cfg, policies);
  // Every policy of a comparison is checked before the first one runs (or is printed as runnable).
  for (const entry of policies) checkJob(comparedConfig(cfg, entry), { profileHere: !setup.nodes });
  if (flags.printConfig) {
    out(jobFileText(flags, 'run', RUN_FLAGS));
    return 0;
  }
  const gantt = flags.gantt as string | undefined;
  const offlineCharts = flags.reference === 'offline' && gantt !== undefined;
  checkReferenceFlags(flags);
  checkTraceOutputs('run', flags.trace as string | undefined, gantt, policies, offlineCharts);
  const report = reportPath(flags, 'run', [flags.trace, flags.gantt]);
  const outcomes = await runPolicies(cfg, setup, policies, jobOf);
  const written = writeComparedTraceFiles(
    outcomes.map((o) => o.result),
    flags.trace as string | undefined,
    flags.gantt as string | undefined,
    policies,
  );
  for (const o of outcomes) warnRejects('run', o.result);
  // One process: every stage on one clock, so message times are measured (as the bound takes them).
  const rows = withReference(
    flags,
    outcomes.map(summary),
    outcomes.map((o) => o.result),
    outcomes.every((o) => o.processes === 1),
    { gantts: offlineCharts ? offlineGanttPaths(gantt, policies) : undefined, written },
  );
  const base = rows[0].makespan_ms;
  const speedup = (ms: number) => speedupOver(base, ms);
  const json = compare ? rows.map((r) => ({ ...r, speedup: speedup(r.makespan_ms) })) : rows;
  if (report)
    written.push(
      writeRunReport(
        report,
        json,
        outcomes.map((o) => o.result),
        policies.map(entryLabel),
      ),
    );
  if (flags.json) {
    // With --compare, always a list (one row per compared policy), as sim prints.
    out(JSON.stringify(compare ? json : rows[0]));
    return 0;
  }
  out(comparisonTable(cfg, rows, speedup));
  for (const w of written) out(`wrote ${w}`);
  return 0;
}

/** The job name of the k-th policy run, every one checked. */
function jobNamesOf(cfg: JobConfig, policies: readonly string[]): (k: number) => string {
  // Each run of a comparison is its own job, so their messages never mix: J-0, J-1, ...
  const jobOf = (k: number) => (policies.length > 1 ? `${cfg.job}-${k}` : cfg.job);
  try {
    policies.forEach((_, k) => checkJobName(jobOf(k)));
  } catch (err) {
    throw new UsageError(
      policies.length > 1
        ? `run: --compare runs policy k as job ${cfg.job}-k; ${(err as Error).message}`
        : `run: --job: ${(err as Error).message}`,
    );
  }
  return jobOf;
}

/** Runs the policies one after another, each as its own job. */
async function runPolicies(
  cfg: JobConfig,
  setup: RunSetup,
  policies: readonly string[],
  jobOf: (k: number) => string,
): Promise<RunOutcome[]> {
  const outcomes: RunOutcome[] = [];
  for (const entry of policies)
    outcomes.push(await runOnce({ ...comparedConfig(cfg, entry), job: jobOf(outcomes.length) }, setup));
  return outcomes;
}

/** The table of a run or a comparison (with the offline columns and the ratio note when the reference was computed). */
function comparisonTable(
  cfg: JobConfig,
  rows: readonly WithReference<ReturnType<typeof summary>>[],
  speedup: (ms: number) => number,
): string {
  return resultsTable(
    rows,
    [
      COLUMNS.policy,
      COLUMNS.limit,
      COLUMNS.makespan(1),
      { head: `speedup vs ${rows[0].policy}`, cell: (r) => `${speedup(r.makespan_ms).toFixed(2)}x` },
      COLUMNS.peak,
      COLUMNS.cap,
      COLUMNS.lowerBound(1),
      COLUMNS.efficiency,
    ],
    [
      COLUMNS.bubble,
      { head: 'messages', cell: (r) => String(r.messages) },
      { head: 'processes', cell: (r) => String(r.processes) },
    ],
    `real clock, transport=${rows[0].transport}, P=${cfg.stages} M=${cfg.microbatches} V=${cfg.chunks} profile=${cfg.profile} jitter=${cfg.jitter} scale=${cfg.jitterScale} seed=${cfg.seed} iterations=${cfg.iterations} (after ${cfg.warmupIterations} warm-up)`,
  );
}
