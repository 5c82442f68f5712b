// `baton trace`: work with trace files written by `--trace FILE` (Chrome trace JSON):
// draw the pipeline Gantt chart, check the file against the Trace Event Format, or
// summarize each stage. Exit codes: 0 ok, 2 usage error or a file that is not a valid
// trace; `check` answers 1 for a file that is not a valid trace (its finding, not an error).

import * as fs from 'fs';
import { BatonEvent } from '../stage/events';
import { checkOutputFile } from './output-paths';
import { HELP_FLAG, FlagSpec, ParsedFlags, UsageError, helpText, parseFlags, printedHelp } from './args';
import { formatTable, printable } from './table';
import { TraceContentError, batonEventsFromTrace } from './trace/chrome-read';
import { checkChromeTrace } from './trace/chrome-check';
import { LoadedTrace, TraceFileError, loadTrace, readJson, stageCount } from './trace-file';
import { GanttError, ganttSvg, ganttTasks } from './trace/gantt';

/** Wider than any screen or browser's largest image many times over: a chart this wide is a typo. */
const MAX_GANTT_WIDTH = 100_000;

const GANTT_FLAGS: readonly FlagSpec[] = [
  { name: 'output', short: 'o', type: 'string', metavar: 'FILE.svg', help: 'where to write the SVG (also -o)' },
  { name: 'title', type: 'string', metavar: 'T', help: 'chart title (default: the policy and job from the trace)' },
  {
    name: 'width',
    type: 'int',
    metavar: 'PX',
    help: `chart width in pixels, 300 to ${MAX_GANTT_WIDTH}`,
    default: 1200,
  },
  { name: 'json', type: 'bool', help: 'print what was written as JSON ({output, svg_bytes, tasks, stages, width})' },
  HELP_FLAG,
];
const JSON_FLAGS: readonly FlagSpec[] = [{ name: 'json', type: 'bool', help: 'print JSON instead of text' }, HELP_FLAG];

const GANTT_HELP = helpText(
  'trace gantt',
  'draw the pipeline Gantt chart of a trace as SVG',
  'baton trace gantt FILE.json -o FILE.svg [--title T] [--width PX] [--json]',
  GANTT_FLAGS,
);
const CHECK_HELP = helpText(
  'trace check',
  'check a trace file against the Chrome Trace Event Format (exit 1 when invalid)',
  'baton trace check FILE.json [--json]',
  JSON_FLAGS,
);
const SUMMARY_HELP = helpText(
  'trace summary',
  'per stage: tasks, busy ms, wait ms, messages sent and received',
  'baton trace summary FILE.json [--json]',
  JSON_FLAGS,
);

export const TRACE_HELP = `baton trace — inspect trace files written with --trace FILE (Chrome trace JSON; open them in ui.perfetto.dev)

Usage: baton trace <gantt|check|summary> FILE.json [options]   (baton trace <sub> --help for options)

Subcommands:
  gantt     draw the pipeline Gantt chart as SVG: baton trace gantt FILE.json -o FILE.svg [--title T]
  check     check the file against the Trace Event Format; exit 1 and list the problems when invalid
  summary   per stage: tasks, busy ms, wait ms, messages
`;

/** True when `a` and `b` name one existing file (through links and relative paths). */
function sameFile(a: string, b: string): boolean {
  try {
    const sa = fs.statSync(a);
    const sb = fs.statSync(b);
    return sa.dev === sb.dev && sa.ino === sb.ino;
  } catch {
    return false;
  }
}

function onePositional(positional: string[], sub: string): string {
  if (positional.length !== 1)
    throw new UsageError(
      `trace ${sub}: expected one trace file, got ${positional.length === 0 ? 'none' : positional.map((p) => JSON.stringify(p)).join(' ')}`,
    );
  return positional[0];
}

export interface StageSummary {
  stage: number;
  tasks: number;
  busy_ms: number;
  wait_ms: number;
  sent: number;
  received: number;
}

/** Per stage: tasks started, busy ms of the tasks that ended, waits and messages. Throws
 * GanttError for a task that starts twice or ends without starting (as the chart does). */
export function summarizeStages(events: readonly BatonEvent[], stages: number): StageSummary[] {
  const rows: StageSummary[] = [];
  const row = (s: number) => {
    while (rows.length <= s) rows.push({ stage: rows.length, tasks: 0, busy_ms: 0, wait_ms: 0, sent: 0, received: 0 });
    return rows[s];
  };
  for (let s = 0; s < stages; s++) row(s);
  for (const t of ganttTasks(events)) row(t.stage).busy_ms += t.end - t.start;
  for (const e of events) {
    if (e.stage < 0) continue;
    const r = row(e.stage);
    if (e.type === 'task-start') r.tasks++;
    else if (e.type === 'wait') r.wait_ms += e.ms;
    else if (e.type === 'send') r.sent++;
    else if (e.type === 'receive' && e.src >= 0) r.received++;
  }
  return rows;
}

type Out = (s: string) => void;
type SubcommandRun = (argv: readonly string[], out: Out) => Promise<number>;

/** Subcommand `sub` of one trace file: --help prints `help`, else `run` takes the file and the flags. */
function onTraceFile(
  sub: string,
  specs: readonly FlagSpec[],
  help: string,
  run: (file: string, flags: ParsedFlags, out: Out) => Promise<number>,
): SubcommandRun {
  return async (argv, out) => {
    const { flags, positional } = parseFlags(argv, specs, `trace ${sub}`, Infinity);
    if (printedHelp(flags, help, out)) return 0;
    return run(onePositional(positional, sub), flags, out);
  };
}

async function gantt(file: string, flags: ParsedFlags, out: Out): Promise<number> {
  const output = flags.output as string | undefined;
  if (!output) throw new UsageError('trace gantt: -o FILE.svg is required');
  checkOutputFile(output, 'trace gantt: -o');
  if (sameFile(file, output))
    throw new UsageError(`trace gantt: -o ${output} is the trace being read; give another file`);
  const width = flags.width as number;
  if (width < 300 || width > MAX_GANTT_WIDTH)
    throw new UsageError(`trace gantt: --width must be 300 to ${MAX_GANTT_WIDTH} px, got ${width}`);
  const trace = loadTrace(file);
  const events = batonEventsFromTrace(trace);
  const config = (trace.metadata?.config ?? {}) as Record<string, unknown>;
  const title =
    (flags.title as string | undefined) ??
    (trace.metadata?.title as string | undefined) ??
    [config.policy, trace.metadata?.job ? `job ${trace.metadata.job}` : undefined].filter(Boolean).join(' · ');
  const stages = stageCount(trace, events);
  const svg = ganttSvg(events, { stages, title: title || undefined, width });
  fs.writeFileSync(output, svg);
  const tasks = events.filter((e) => e.type === 'task-start').length;
  out(
    flags.json
      ? JSON.stringify({ output, svg_bytes: Buffer.byteLength(svg), tasks, stages, width })
      : `wrote ${output} (${tasks} tasks)`,
  );
  return 0;
}

async function check(file: string, flags: ParsedFlags, out: Out): Promise<number> {
  let json: unknown;
  let problems: string[];
  try {
    json = readJson(file);
    problems = checkChromeTrace(json);
  } catch (e) {
    if (!(e instanceof TraceFileError)) throw e;
    problems = [e.message];
  }
  const count = Array.isArray(json)
    ? json.length
    : Array.isArray((json as LoadedTrace)?.traceEvents)
      ? (json as LoadedTrace).traceEvents.length
      : 0;
  if (flags.json) out(JSON.stringify({ file, valid: problems.length === 0, events: count, problems }));
  else if (problems.length === 0) out(`${printable(file)}: valid trace, ${count} trace events`);
  else
    out(
      `${printable(file)}: ${problems.length} problem${problems.length === 1 ? '' : 's'}\n${problems
        .slice(0, 50)
        .map((p) => `  ${printable(p)}`)
        .join('\n')}${problems.length > 50 ? `\n  … and ${problems.length - 50} more` : ''}`,
    );
  return problems.length === 0 ? 0 : 1;
}

async function summary(file: string, flags: ParsedFlags, out: Out): Promise<number> {
  const trace = loadTrace(file);
  const events = batonEventsFromTrace(trace);
  const rows = summarizeStages(events, stageCount(trace, events));
  if (flags.json) out(JSON.stringify(rows));
  else
    out(
      formatTable(
        ['stage', 'tasks', 'busy ms', 'wait ms', 'sent', 'received'],
        rows.map((r) => [
          String(r.stage),
          String(r.tasks),
          r.busy_ms.toFixed(2),
          r.wait_ms.toFixed(2),
          String(r.sent),
          String(r.received),
        ]),
        `${trace.metadata?.job ? `job ${printable(String(trace.metadata.job))} · ` : ''}${rows.length} stages · ${events.length} runtime events`,
      ),
    );
  return 0;
}

const SUBCOMMANDS: Record<string, SubcommandRun> = {
  gantt: onTraceFile('gantt', GANTT_FLAGS, GANTT_HELP, gantt),
  check: onTraceFile('check', JSON_FLAGS, CHECK_HELP, check),
  summary: onTraceFile('summary', JSON_FLAGS, SUMMARY_HELP, summary),
};

/** Usage errors, unreadable files, files that are not valid traces and traces whose events
 * cannot be read as Baton's (a task started twice, say) exit 2 (check answers 1 for invalid
 * ones); messages go to `err`. */
export async function traceCommand(
  argv: readonly string[],
  out: (s: string) => void,
  err: (s: string) => void = (s) => process.stderr.write(`${s}\n`),
): Promise<number> {
  const [sub, ...rest] = argv;
  // Asked for, the help is the answer (stdout); a missing subcommand is a usage error (stderr), as a missing command is.
  if (sub === '--help' || sub === '-h' || sub === 'help') {
    out(TRACE_HELP);
    return 0;
  }
  if (sub === undefined) {
    err(`baton trace: a subcommand is required\n\n${TRACE_HELP.trimEnd()}`);
    return 2;
  }
  // Own keys only: `constructor` or `__proto__` is no subcommand.
  const run = Object.hasOwn(SUBCOMMANDS, sub) ? SUBCOMMANDS[sub] : undefined;
  if (!run) {
    err(`baton trace: unknown subcommand ${JSON.stringify(sub)}; expected gantt, check or summary`);
    return 2;
  }
  try {
    return await run(rest, out);
  } catch (e) {
    const error = e as Error;
    // Messages quote the file (JSON.parse's quotes the text it choked on): no escapes reach the terminal.
    err(`baton trace ${sub}: ${error.name}: ${printable(error.message)}`);
    const fileProblem =
      error instanceof TraceFileError || error instanceof TraceContentError || error instanceof GanttError;
    return error instanceof UsageError || fileProblem ? 2 : 1;
  }
}
