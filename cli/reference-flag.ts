// `--reference none|offline` of sim and run: with offline, each run's summary gains the
// offline reference (job/run-reference.ts) and the tables a column for it.

import { JobResult, summarize } from '../job/run-result';
import { runReference } from '../job/run-reference';
import { AnnealProgress } from '../checks/offline-anneal';
import { FlagSpec, ParsedFlags, UsageError } from './args';
import { writeOfflineGantt } from './offline-gantt';

export const REFERENCE_FLAG: FlagSpec = {
  name: 'reference',
  type: 'string',
  metavar: 'none|offline',
  choices: ['none', 'offline'],
  default: 'none',
  help: "offline: also compute a clairvoyant schedule on the run's realized durations under the same buffer limit (search; a few seconds per iteration at P=8, M=64, up to three minutes (five at P=16) where the schedule stays more than 5% above the lower bound; see --reference-anneal) and report offline_ms and efficiency_vs_offline",
};

export const REFERENCE_ANNEAL_FLAG: FlagSpec = {
  name: 'reference-anneal',
  type: 'int',
  metavar: 'N',
  help: "moves of the offline reference's last step, simulated annealing over stage orders, run where the schedule stays more than 5% above the lower bound (default 20,000 per task, at most 20 million: 100-180 s at P=8, M=64; 0 skips it)",
};

/** The flags of the offline reference, for sim and run. */
export const REFERENCE_FLAGS: readonly FlagSpec[] = [REFERENCE_FLAG, REFERENCE_ANNEAL_FLAG];

/** What the two ratios mean, for a table's caption. */
export const RATIO_NOTE =
  "efficiency = lower bound / makespan (1: provably optimal; a binding schedule's bound takes its own in-flight counts); " +
  'vs offline = offline reference / makespan (1: as good as the clairvoyant schedule found under the buffer limit)';

type Summary = ReturnType<typeof summarize>;
export type WithReference<S> = S & Partial<ReturnType<typeof runReference>>;

/** Check the reference flags before any run (a usage error names what is wrong); the annealing's moves if given. */
export function checkReferenceFlags(flags: ParsedFlags): number | undefined {
  const annealSteps = flags.referenceAnneal as number | undefined;
  if (annealSteps !== undefined && flags.reference !== 'offline')
    throw new UsageError('--reference-anneal tunes the offline reference: give it with --reference offline');
  if (annealSteps !== undefined && annealSteps < 0)
    throw new UsageError(`--reference-anneal must be 0 or more moves, got ${annealSteps}`);
  return annealSteps;
}

/**
 * The rows with the offline reference of their results added, when --reference offline.
 * `gantts`: where to draw each result's first measured iteration's reference (cli/offline-gantt.ts),
 * each path written added to `written`.
 */
export function withReference<S extends Summary>(
  flags: ParsedFlags,
  rows: S[],
  results: readonly JobResult[],
  sharedClock: boolean,
  charts: { gantts?: readonly string[]; written?: string[] } = {},
): WithReference<S>[] {
  const annealSteps = checkReferenceFlags(flags);
  if (flags.reference !== 'offline') return rows;
  // The searches can take minutes: a line each on a terminal (pipes and --json output stay as they were).
  const progress = process.stderr.isTTY === true;
  return rows.map((row, i) => {
    const r = results[i];
    const first = r.iterations[0];
    const onAnnealProgress: AnnealProgress | undefined = progress
      ? (done, of, best) =>
          process.stderr.write(
            `offline reference: ${r.config.policy}: annealing, ${Math.round((100 * done) / of)}% of ${of.toLocaleString('en-US')} moves, best ${best.toFixed(1)} ms\n`,
          )
      : undefined;
    const reference = runReference(r, sharedClock, { annealSteps, onAnnealProgress }, (it, ms, searchMs, schedule) => {
      if (progress)
        process.stderr.write(
          `offline reference: ${r.config.policy} iteration ${it}: ${ms.toFixed(1)} ms (${(searchMs / 1000).toFixed(1)} s of search)\n`,
        );
      const file = charts.gantts?.[i];
      if (file && it === first.iteration)
        charts.written?.push(writeOfflineGantt(file, r, it, schedule, first.makespan_ms));
    });
    return { ...row, ...reference };
  });
}

/** The table's offline columns (none without the reference). */
export function referenceColumns<S>(rows: readonly WithReference<S>[]): {
  head: string[];
  cells: (r: WithReference<S>) => string[];
} {
  if (rows.every((r) => r.offline_ms === undefined)) return { head: [], cells: () => [] };
  return {
    head: ['offline ms', 'vs offline'],
    cells: (r) => [r.offline_ms!.toFixed(1), r.efficiency_vs_offline!.toFixed(3)],
  };
}
