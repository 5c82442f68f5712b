// What `baton train` writes besides its result: progress on stderr, the metrics file (one
// JSON line per iteration, or per update in asynchronous mode), the loss plot, the trace,
// the Gantt chart and the HTML report. Every path is checked before the run starts.

import * as fs from 'fs';
import { IterationRecord } from '../actors/coordinator';
import { JobResult } from '../job/run-local';
import { BatonEvent } from '../stage/events';
import { FlagSpec, ParsedFlags, UsageError } from './args';
import { checkOutputFile, writtenFileKey } from './output-paths';
import { TRACE_OUTPUT_FLAGS, writeTraceFiles } from './trace-output';
import { REPORT_FLAG } from './report/report-flag';
import { lossCurveSvg } from './report/loss-svg';
import { ProgressOptions, TrainProgress } from './progress';

export const TRAIN_OUTPUT_FLAGS: readonly FlagSpec[] = [
  // The run command's --trace and --gantt; train has no --compare, so its help says less.
  ...TRACE_OUTPUT_FLAGS.map((f) => ({ ...f, help: f.help.replace(/ \(with --compare:.*\)$/, '') })),
  {
    name: 'metrics',
    type: 'string',
    metavar: 'FILE.jsonl',
    help: 'write one JSON line per iteration as it ends (sync), or per update at the end of the run (async: the stages report their losses then)',
  },
  {
    name: 'plot',
    type: 'string',
    metavar: 'FILE.svg',
    help: 'draw the loss curve (training loss per iteration or update, the validation loss at the end)',
  },
  REPORT_FLAG,
  { name: 'quiet', type: 'bool', help: 'no progress lines on stderr' },
];

export interface TrainOutputPaths {
  trace?: string;
  gantt?: string;
  metrics?: string;
  plot?: string;
  report?: string;
}

/** The output paths given, each writable and no two the same file; refused before the run. */
export function trainOutputPaths(flags: ParsedFlags): TrainOutputPaths {
  const paths: TrainOutputPaths = {};
  const seen = new Map<string, string>();
  for (const key of ['trace', 'gantt', 'metrics', 'plot', 'report'] as const) {
    const file = flags[key] as string | undefined;
    if (file === undefined) continue;
    if (file === '') throw new UsageError(`train: --${key} needs a file path, got ""`);
    checkOutputFile(file, `train: --${key}`);
    const other = seen.get(writtenFileKey(file));
    if (other)
      throw new UsageError(
        `train: --${key} ${file} is the file ${other} is written to as well; give them different paths`,
      );
    seen.set(writtenFileKey(file), `--${key} ${file}`);
    paths[key] = file;
  }
  return paths;
}

/** One line of a synchronous run's metrics file. */
export function iterationMetrics(
  rec: IterationRecord,
  loss: number | undefined,
  tokens: number,
  clock: 'real' | 'virtual',
  elapsedMs: number,
) {
  return {
    iteration: rec.iteration,
    loss: loss ?? null,
    makespan_ms: rec.makespan,
    tokens_per_s: clock === 'virtual' || rec.makespan <= 0 ? null : tokens / (rec.makespan / 1000),
    elapsed_ms: elapsedMs,
    peak_inflight: rec.reports.map((r) => (typeof r.peakInflight === 'number' ? r.peakInflight : null)),
  };
}

/**
 * An asynchronous run's updates in the order stage 0 finished them (the update of a
 * microbatch ends with its chunk-0 backward there): its loss, when it ended (ms from the
 * first task) and the staleness stage 0 saw (its updates between the forward and the backward).
 */
export function asyncUpdateRows(events: readonly BatonEvent[], losses: readonly number[]) {
  const rows: { update: number; mb: number; loss: number | null; t_ms: number; staleness: number }[] = [];
  const atForward = new Map<number, number>();
  const lag = new Map<number, number>();
  let t0 = Infinity;
  for (const e of events) {
    if (e.type === 'task-start') t0 = Math.min(t0, e.t);
    if (e.stage !== 0 || (e.type !== 'task-start' && e.type !== 'task-end') || e.chunk !== 0) continue;
    if (e.type === 'task-start' && e.kind === 'F') atForward.set(e.mb, rows.length);
    if (e.type === 'task-start' && e.kind === 'B') lag.set(e.mb, rows.length - (atForward.get(e.mb) ?? rows.length));
    if (e.type === 'task-end' && e.kind === 'B') {
      const loss = losses[e.mb];
      rows.push({
        update: rows.length + 1,
        mb: e.mb,
        loss: Number.isFinite(loss) ? loss : null,
        t_ms: e.t - t0,
        staleness: lag.get(e.mb) ?? 0,
      });
    }
  }
  return rows;
}

/** A metrics file written line by line (emptied when the run starts, so `tail -f` follows it). */
export class MetricsFile {
  constructor(private readonly file: string) {
    fs.writeFileSync(file, '');
  }

  add(row: object): void {
    fs.appendFileSync(this.file, `${JSON.stringify(row)}\n`);
  }
}

/** Progress on stderr unless --quiet (also under --json: stdout keeps the one JSON object). */
export function progressFor(flags: ParsedFlags, o: Omit<ProgressOptions, 'write' | 'tty'>): TrainProgress | null {
  if (flags.quiet) return null;
  return new TrainProgress({ ...o, write: (s) => process.stderr.write(s), tty: process.stderr.isTTY === true });
}

export interface TrainedRun {
  readonly result: JobResult;
  readonly mode: 'sync' | 'async';
  readonly losses: readonly number[];
  readonly valLoss: number;
  readonly firstIteration: number;
  readonly title: string;
}

/** The loss curve: per iteration (sync, numbered from 1) or per update (async, in stage 0's order). */
export function lossPlotOf(r: TrainedRun) {
  const points: [number, number][] =
    r.mode === 'sync'
      ? r.losses.map((l, i) => [r.firstIteration + i + 1, l])
      : asyncUpdateRows(r.result.events, r.losses).map((u) => [u.update, u.loss ?? NaN]);
  const lastX = points.length > 0 ? points[points.length - 1][0] : 0;
  return {
    title: r.title,
    xLabel: r.mode === 'sync' ? 'iteration' : 'update',
    series: [{ name: 'training loss', points }],
    validation: [{ name: 'validation loss', x: lastX, y: r.valLoss }],
  };
}

/** The files written after the run (trace, chart, plot, an asynchronous run's metrics), in order. */
export function writeTrainFiles(paths: TrainOutputPaths, r: TrainedRun): string[] {
  const written = writeTraceFiles(r.result, paths.trace, paths.gantt);
  if (paths.plot) {
    fs.writeFileSync(paths.plot, lossCurveSvg(lossPlotOf(r)));
    written.push(paths.plot);
  }
  if (paths.metrics && r.mode === 'async') {
    const m = new MetricsFile(paths.metrics);
    for (const row of asyncUpdateRows(r.result.events, r.losses)) m.add(row);
  }
  if (paths.metrics) written.push(paths.metrics);
  return written;
}
