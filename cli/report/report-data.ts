// What a report shows, as plain data: the rows of the run's table (its JSON summaries),
// the runs whose events are known (for the Gantt charts, utilization and latencies) and
// the loss curves of training runs. Built from a finished job in memory (run --report,
// train --report) or from the files `baton report` reads (a --json result, traces).

import { JobResult } from '../../job/run-local';
import { BatonEvent } from '../../stage/events';
import { measuredEvents } from '../trace-output';

export type Row = Record<string, unknown>;

export interface ReportRun {
  /** The policy, and its buffer limit when the comparison gave one (bf @depth). */
  readonly label: string;
  readonly stages: number;
  /** The measured iterations' events. */
  readonly events: readonly BatonEvent[];
  /** The stages ran in more than one process: their clocks differ, and so latencies mix in the offsets. */
  readonly processes?: number;
}

export interface ReportLoss {
  readonly name: string;
  readonly mode: 'sync' | 'async';
  readonly losses: readonly number[];
  readonly valLoss?: number;
  /** The first iteration of this run (a resumed checkpoint's). */
  readonly firstIteration: number;
}

export interface ReportData {
  readonly title: string;
  readonly rows: readonly Row[];
  readonly runs: readonly ReportRun[];
  readonly losses: readonly ReportLoss[];
  /** Where the data came from (files or command), shown under the title. */
  readonly source: string;
}

/** A compared or single run's report: one row and one run per result. */
export function runReportData(
  title: string,
  rows: readonly Row[],
  results: readonly JobResult[],
  labels: readonly string[],
  source: string,
): ReportData {
  return {
    title,
    rows,
    runs: results.map((r, i) => ({
      label: labels[i] ?? r.policy.name,
      stages: r.shape.stages,
      events: measuredEvents(r),
      processes: typeof rows[i]?.processes === 'number' ? (rows[i].processes as number) : undefined,
    })),
    losses: lossesOf(rows),
    source,
  };
}

/** The loss curves of the rows that are training results (they carry `losses`). */
export function lossesOf(rows: readonly Row[]): ReportLoss[] {
  return rows.flatMap((r, i) => {
    if (!Array.isArray(r.losses)) return [];
    // JSON holds a diverged run's non-finite losses as null.
    const losses = (r.losses as unknown[]).map((x) => (typeof x === 'number' ? x : NaN));
    const mode = r.mode === 'async' ? 'async' : 'sync';
    const name = `${String(r.policy ?? 'run')}${mode === 'async' ? ` ${String(r.consistency ?? '')}` : ''}`.trim();
    return [
      {
        name: rows.length > 1 ? `${i + 1}: ${name}` : name,
        mode,
        losses,
        valLoss: typeof r.val_loss === 'number' ? r.val_loss : undefined,
        firstIteration: typeof r.start_iteration === 'number' ? r.start_iteration : 0,
      },
    ];
  });
}

/** The label of a compared entry from its config: the policy, with a buffer limit other than the default. */
export function runLabel(policy: string, bufferLimit: unknown, defaultLimit: unknown): string {
  return bufferLimit === undefined || bufferLimit === defaultLimit ? policy : `${policy} @${String(bufferLimit)}`;
}
