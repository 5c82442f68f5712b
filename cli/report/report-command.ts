// `baton report RUN.json [TRACE.json…] -o report.html`: one self-contained HTML report from
// a command's --json result (sim, run, train; one object or a comparison's list) and the
// Chrome traces its --trace wrote (each compared policy's), in any order.

import * as fs from 'fs';
import { DEFAULTS } from '../../job/config';
import { InputError } from '../../base/errors';
import { HELP_FLAG, FlagSpec, helpText, parseFlags, printedHelp } from '../args';
import { checkOutputFile } from '../output-paths';
import { TraceContentError, batonEventsFromTrace } from '../trace/chrome-read';
import { checkChromeTrace } from '../trace/chrome-check';
import { LoadedTrace, TraceFileError, readJson, stageCount } from '../trace-file';
import { ReportData, ReportRun, Row, lossesOf, runLabel } from './report-data';
import { reportHtml } from './report-html';

class ReportInputError extends InputError {
  override name = 'ReportInputError';
}

const REPORT_FLAGS: readonly FlagSpec[] = [
  {
    name: 'output',
    short: 'o',
    type: 'string',
    metavar: 'FILE.html',
    help: 'where to write the report (also -o); required',
  },
  { name: 'title', type: 'string', metavar: 'TEXT', help: 'the report title (default: from the run)' },
  HELP_FLAG,
];

export const REPORT_HELP = helpText(
  'report',
  'one self-contained HTML report of a run: its table, Gantt charts on one time axis, utilization, latencies, loss curves, swaps',
  'baton report RUN.json [TRACE.json…] -o report.html   (RUN.json: a --json result of sim, run or train; TRACE.json: what --trace wrote)',
  REPORT_FLAGS,
);

/** The rows of a --json result: one object, or a comparison's list of them. */
function rowsOf(file: string, json: unknown): Row[] {
  const rows = Array.isArray(json) ? json : [json];
  if (rows.length === 0 || !rows.every((r) => r && typeof r === 'object' && !Array.isArray(r)))
    throw new ReportInputError(`${file}: not a --json result of sim, run or train (an object or a list of objects)`);
  if (!rows.every((r) => 'makespan_ms' in (r as Row) || 'losses' in (r as Row)))
    throw new ReportInputError(`${file}: not a --json result of sim, run or train (no makespan_ms or losses)`);
  return rows as Row[];
}

/** A trace's run: its events, stages and the label its config gives. */
function runOfTrace(file: string, trace: LoadedTrace): ReportRun {
  const events = batonEventsFromTrace(trace);
  const config = (trace.metadata?.config ?? {}) as Record<string, unknown>;
  const policy = typeof config.policy === 'string' ? config.policy : file;
  return {
    label: runLabel(policy, config.bufferLimit, DEFAULTS.bufferLimit),
    stages: stageCount(trace, events),
    events,
  };
}

function isTrace(json: unknown): boolean {
  return Array.isArray(json)
    ? json.length > 0 && 'ph' in (json[0] as object)
    : !!json && typeof json === 'object' && 'traceEvents' in json;
}

/** The report's data from the files given, results and traces told apart by their content. */
export function reportFromFiles(files: readonly string[], title?: string): ReportData {
  const rows: Row[] = [];
  const runs: ReportRun[] = [];
  for (const file of files) {
    const json = readJson(file);
    if (isTrace(json)) {
      const problems = checkChromeTrace(json);
      if (problems.length > 0) throw new ReportInputError(`${file} is not a valid trace: ${problems[0]}`);
      runs.push(runOfTrace(file, Array.isArray(json) ? { traceEvents: json } : (json as LoadedTrace)));
    } else rows.push(...rowsOf(file, json));
  }
  // Latencies of stages in different processes mix in the clocks' offsets: the rows say how many there were.
  const withProcesses = runs.map((r, i) =>
    typeof rows[i]?.processes === 'number' ? { ...r, processes: rows[i].processes as number } : r,
  );
  return {
    title: title ?? defaultTitle(rows, runs),
    rows,
    runs: withProcesses,
    losses: lossesOf(rows),
    source: `from ${files.join(', ')}`,
  };
}

function defaultTitle(rows: readonly Row[], runs: readonly ReportRun[]): string {
  const names = rows.length > 0 ? rows.map((r) => String(r.policy)) : runs.map((r) => r.label);
  return `Baton report: ${names.join(' vs ')}`;
}

export async function reportCommand(argv: readonly string[], out: (s: string) => void): Promise<number> {
  const { flags, positional } = parseFlags(argv, REPORT_FLAGS, 'report', Infinity);
  if (printedHelp(flags, REPORT_HELP, out)) return 0;
  if (positional.length === 0) throw new ReportInputError('report: give RUN.json (a --json result) and/or trace files');
  const output = flags.output as string | undefined;
  if (!output) throw new ReportInputError('report: -o FILE.html is required (where to write the report)');
  checkOutputFile(output, 'report: -o');
  let data: ReportData;
  try {
    data = reportFromFiles(positional, flags.title as string | undefined);
  } catch (e) {
    if (e instanceof TraceFileError || e instanceof TraceContentError)
      throw new ReportInputError(`report: ${e.message}`, { cause: e });
    throw e;
  }
  fs.writeFileSync(output, reportHtml(data));
  out(`wrote ${output}`);
  return 0;
}
