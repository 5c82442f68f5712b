// The Gantt chart of a run's offline reference (--reference offline with --gantt): the
// clairvoyant schedule of the run's first measured iteration drawn as the run's own chart
// is, on a time axis as long as the longer of the two, so the two pictures compare at a
// glance: where the run's stages idled and the reference's did not.

import * as fs from 'fs';
import { ScheduledTask } from '../checks/offline-reference';
import { JobResult } from '../job/run-result';
import { BatonEvent } from '../stage/events';
import { ganttSvg } from './trace/gantt';

/** The schedule as the task events a run would have emitted (in-flight counts as a stage counts them). */
export function scheduleEvents(iteration: number, schedule: readonly ScheduledTask[], split: boolean): BatonEvent[] {
  const release = split ? 'W' : 'B';
  const marks: { t: number; end: boolean; e: BatonEvent }[] = [];
  const open = new Map<number, number>();
  // A stage runs one task at a time, so in start order its count is a running sum.
  for (const x of [...schedule].sort((a, b) => a.start - b.start || a.end - b.end)) {
    const base = { stage: x.stage, iteration, kind: x.task.kind, mb: x.task.mb, chunk: x.task.chunk };
    const n = (open.get(x.stage) ?? 0) + (x.task.kind === 'F' ? 1 : 0);
    open.set(x.stage, x.task.kind === release ? n - 1 : n);
    marks.push({
      t: x.start,
      end: false,
      e: { ...base, type: 'task-start', t: x.start, inflight: n, backpressure: false },
    });
    marks.push({ t: x.end, end: true, e: { ...base, type: 'task-end', t: x.end } });
  }
  // Ends before starts at equal times, as a stage frees itself before its next task.
  return marks.sort((a, b) => a.t - b.t || Number(b.end) - Number(a.end)).map((m) => m.e);
}

/** The chart of `schedule` (iteration `iteration` of `r`, which took `runMs`), on an axis of the longer of the two. */
export function offlineGanttSvg(
  r: JobResult,
  iteration: number,
  schedule: readonly ScheduledTask[],
  runMs: number,
): string {
  const events = scheduleEvents(iteration, schedule, r.shape.splitBackward);
  const offlineMs = Math.max(0, ...schedule.map((x) => x.end));
  const title = `offline reference for ${r.config.policy}, iteration ${iteration}: ${offlineMs.toFixed(1)} ms (${r.config.policy} took ${runMs.toFixed(1)} ms)`;
  return ganttSvg(events, { stages: r.shape.stages, title, span: Math.max(offlineMs, runMs) });
}

/** Write the chart; the path written. */
export function writeOfflineGantt(file: string, ...args: Parameters<typeof offlineGanttSvg>): string {
  fs.writeFileSync(file, offlineGanttSvg(...args));
  return file;
}
