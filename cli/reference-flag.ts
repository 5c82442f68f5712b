// `--reference none|offline` of sim and run: with offline, each run's summary gains the
// offline reference (job/run-reference.ts) and the tables a column for it.

import { JobResult, summarize } from '../job/run-result';
import { runReference } from '../job/run-reference';
import { FlagSpec, ParsedFlags } from './args';
import { writeOfflineGantt } from './offline-gantt';

export const REFERENCE_FLAG: FlagSpec = {
  name: 'reference',
  type: 'string',
  metavar: 'none|offline',
  choices: ['none', 'offline'],
  default: 'none',
  help: "offline: also compute a clairvoyant schedule on the run's realized durations under the same buffer limit (search; about 1 s per iteration at P=8, M=64, up to 25 times that where the schedule stays more than 5% above the lower bound and the search keeps shortening it) and report offline_ms and efficiency_vs_offline",
};

/** What the two ratios mean, for a table's caption. */
export const RATIO_NOTE =
  "efficiency = lower bound / makespan (1: provably optimal; a binding schedule's bound takes its own in-flight counts); " +
  'vs offline = offline reference / makespan (1: as good as the clairvoyant schedule found under the buffer limit)';

type Summary = ReturnType<typeof summarize>;
export type WithReference<S> = S & Partial<ReturnType<typeof runReference>>;

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
  if (flags.reference !== 'offline') return rows;
  // The searches can take minutes: a line each on a terminal (pipes and --json output stay as they were).
  const progress = process.stderr.isTTY === true;
  return rows.map((row, i) => {
    const r = results[i];
    const first = r.iterations[0];
    const reference = runReference(r, sharedClock, {}, (it, ms, searchMs, schedule) => {
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
