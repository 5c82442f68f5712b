// Writing a run's trace file and Gantt chart (cli/trace/ does the formatting).

import * as fs from 'fs';
import { JobResult, summarize } from '../actors/job';
import { toChromeTrace, writeChromeTrace } from './trace/chrome';
import { ganttSvg } from './trace/gantt';
import { checkOutputFile } from './output-paths';

/** Refuse, before the run, a --trace or --gantt path that could not be written after it. */
export function checkTraceOutputs(command: string, traceFile?: string, ganttFile?: string): void {
  if (traceFile) checkOutputFile(traceFile, `${command}: --trace`);
  if (ganttFile) checkOutputFile(ganttFile, `${command}: --gantt`);
}

/** The trace and the chart show the measured iterations, as the statistics do (warm-up left out). */
export function writeTraceFiles(r: JobResult, traceFile?: string, ganttFile?: string): string[] {
  const written: string[] = [];
  const s = summarize(r);
  const measured = new Set(r.records.map((x) => x.iteration));
  const events = r.events.filter((e) => e.iteration < 0 || measured.has(e.iteration));
  const title = `${s.policy}: P=${s.stages} M=${s.microbatches} V=${s.chunks} ${s.profile}/${s.jitter}, makespan ${s.makespan_ms.toFixed(1)} ms`;
  if (traceFile) {
    writeChromeTrace(traceFile, toChromeTrace(events, { job: r.config.job, stages: r.shape.stages, title, config: r.config }));
    written.push(traceFile);
  }
  if (ganttFile) {
    fs.writeFileSync(ganttFile, ganttSvg(events, { stages: r.shape.stages, title }));
    written.push(ganttFile);
  }
  return written;
}
