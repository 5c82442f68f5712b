// Writing a run's trace file and Gantt chart (cli/trace/ does the formatting).

import * as fs from 'fs';
import * as path from 'path';
import { JobResult, summarize } from '../job/run-local';
import { toChromeTrace } from './trace/chrome';
import { writeChromeTrace } from './trace/chrome-write';
import { ganttSvg } from './trace/gantt';
import { checkOutputFile, writtenFileKey } from './output-paths';
import { FlagSpec, UsageError } from './args';
import { BatonEvent } from '../stage/events';

/** --trace and --gantt, as every command that runs a pipeline takes them. */
export const TRACE_OUTPUT_FLAGS: readonly FlagSpec[] = [
  {
    name: 'trace',
    type: 'string',
    metavar: 'FILE.json',
    help: 'write a Chrome trace (Perfetto) of the run (with --compare: one per policy, the first at FILE, the others at FILE.<policy>.json)',
  },
  {
    name: 'gantt',
    type: 'string',
    metavar: 'FILE.svg',
    help: 'draw the pipeline Gantt chart (with --compare: one per policy, the first at FILE, the others at FILE.<policy>.svg; with --reference offline, also the offline schedule of the first measured iteration beside each, at FILE.offline.svg)',
  },
];

/**
 * Where a comparison writes each policy's file: the first policy's at `file`, every other's
 * with its name before the extension (out/t.json → out/t.bf.json; characters a file name
 * should not hold become _, and a name already taken gets its position too).
 */
export function comparedPaths(file: string, policies: readonly string[]): string[] {
  const ext = path.extname(file);
  const stem = file.slice(0, file.length - ext.length);
  const used = new Set([path.resolve(file)]);
  return policies.map((policy, i) => {
    if (i === 0) return file;
    let p = `${stem}.${policy.replace(/[^A-Za-z0-9_-]+/g, '_')}${ext}`;
    if (used.has(path.resolve(p))) p = `${stem}.${i}${ext}`;
    used.add(path.resolve(p));
    return p;
  });
}

/** Where each compared run's offline-reference chart goes (cli/offline-gantt.ts): `.offline` before the extension. */
export function offlineGanttPaths(ganttFile: string, policies: readonly string[]): string[] {
  return comparedPaths(ganttFile, policies).map((p) => {
    const ext = path.extname(p);
    return `${p.slice(0, p.length - ext.length)}.offline${ext}`;
  });
}

/**
 * Refuse, before the run, a --trace or --gantt path (of any compared policy, and of its
 * offline-reference chart with `offlineCharts`) that could not be written after it.
 */
export function checkTraceOutputs(
  command: string,
  traceFile: string | undefined,
  ganttFile: string | undefined,
  policies: readonly string[] = [''],
  offlineCharts = false,
): void {
  const seen = new Map<string, string>();
  const check = (file: string, flag: string) => {
    checkOutputFile(file, `${command}: ${flag}`);
    const key = writtenFileKey(file);
    const other = seen.get(key);
    if (other !== undefined)
      throw new UsageError(
        `${command}: ${flag} ${file} is the file ${other} is written to as well; give them different paths`,
      );
    seen.set(key, `${flag} ${file}`);
  };
  if (traceFile) for (const f of comparedPaths(traceFile, policies)) check(f, '--trace');
  if (ganttFile) for (const f of comparedPaths(ganttFile, policies)) check(f, '--gantt');
  if (ganttFile && offlineCharts)
    for (const f of offlineGanttPaths(ganttFile, policies)) check(f, '--gantt (its offline-reference chart)');
}

/** Every compared run's trace and chart (comparedPaths says where); the files written, in order. */
export function writeComparedTraceFiles(
  results: readonly JobResult[],
  traceFile?: string,
  ganttFile?: string,
  entries?: readonly string[],
): string[] {
  // The --compare entries name the files (bf@depth is not bf's); without them, the policies.
  const policies = entries ?? results.map((r) => r.config.policy);
  const traces = traceFile ? comparedPaths(traceFile, policies) : [];
  const gantts = ganttFile ? comparedPaths(ganttFile, policies) : [];
  return results.flatMap((r, i) => writeTraceFiles(r, traces[i], gantts[i]));
}

/** The events of the measured iterations (and those of no iteration), as the statistics count them. */
export function measuredEvents(r: JobResult): BatonEvent[] {
  const measured = new Set(r.records.map((x) => x.iteration));
  return r.events.filter((e) => e.iteration < 0 || measured.has(e.iteration));
}

/** The trace and the chart show the measured iterations, as the statistics do (warm-up left out). */
export function writeTraceFiles(r: JobResult, traceFile?: string, ganttFile?: string): string[] {
  const written: string[] = [];
  const s = summarize(r);
  const events = measuredEvents(r);
  const title = `${s.policy}: P=${s.stages} M=${s.microbatches} V=${s.chunks} ${s.profile}/${s.jitter}, makespan ${s.makespan_ms.toFixed(1)} ms`;
  if (traceFile) {
    writeChromeTrace(
      traceFile,
      toChromeTrace(events, { job: r.config.job, stages: r.shape.stages, title, config: r.config }),
    );
    written.push(traceFile);
  }
  if (ganttFile) {
    fs.writeFileSync(ganttFile, ganttSvg(events, { stages: r.shape.stages, title }));
    written.push(ganttFile);
  }
  return written;
}
