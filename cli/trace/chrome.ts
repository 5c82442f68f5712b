// Baton's event stream as a Chrome trace (Trace Event Format, JSON object form) that
// Perfetto and chrome://tracing open: one process per stage with a compute track
// (one complete event per task), a comm track (one complete event per message, from
// send to receive, with a flow arrow to an arrival marker on the receiver's comm
// track), a waits track and an in-flight counter. The original events ride along under
// `metadata.baton_events` so `baton trace gantt|summary` can rebuild the run exactly.
// It does not model clock skew between processes: each stage's times are used as
// emitted, and a receive earlier than its send gives a zero-length message.
//
// Complete events on one thread must nest or be disjoint: Perfetto drops one that
// starts inside another and ends after it. So every start and end is put on one
// nanosecond grid before it is written (rounding ts and dur apart could make a task
// end 1 ns after the next one starts), and messages in flight at the same time, which
// do overlap, go on as many comm lanes (threads "comm", "comm 2", …) as they need.
//
// No event has pid 0 or tid 0: Perfetto reads them as the kernel's idle process and its
// swapper thread. Stage s is pid s + 1; its threads are 1 (compute), 2 (comm), 3 (waits)
// and 4, 5, … (further comm lanes). Reading a trace back (chrome-read.ts) goes by the
// process and thread names, so traces written with the earlier numbering (stage s as pid
// s, tids 0, 1, 2) read back the same; chrome-check.ts checks a file against the format.

import { BatonEvent, MAX_EVENT_TIME_MS, TaskEndEvent, TaskStartEvent } from '../../stage/events';
import { formatTask } from '../../policies/task';
import { pairTaskEvents } from '../../checks/task-spans';
import { ChromeEvent, TID, TraceClock, commTid, stagePid, traceClock } from './chrome-format';
import { messageEvents } from './chrome-messages';

export { ChromeEvent, TID, commTid, stagePid } from './chrome-format';

export interface ChromeTraceMeta {
  job: string;
  stages: number;
  title?: string;
  config?: object;
}

export interface ChromeTrace {
  traceEvents: ChromeEvent[];
  displayTimeUnit: 'ms';
  metadata: ChromeTraceMeta & { generator: 'baton'; time_origin_ms: number; baton_events: BatonEvent[] };
}

export class TraceBuildError extends Error {
  override name = 'TraceBuildError';
}

export function toChromeTrace(events: readonly BatonEvent[], meta: ChromeTraceMeta): ChromeTrace {
  if (!Number.isInteger(meta.stages) || meta.stages < 1)
    throw new TraceBuildError(`toChromeTrace: stages must be a positive integer, got ${JSON.stringify(meta.stages)}`);
  let origin = events.length === 0 ? 0 : Infinity;
  let stages = meta.stages;
  let farthest = 0;
  for (const e of events) {
    origin = Math.min(origin, e.t);
    stages = Math.max(stages, e.stage + 1);
    farthest = Math.max(farthest, Math.abs(e.t));
  }
  // baton trace reads back only times it can hold (stage/events.ts): a virtual run of a heavy
  // profile can go beyond them, and its trace would be written only to be refused.
  if (farthest > MAX_EVENT_TIME_MS)
    throw new TraceBuildError(
      `the run's timeline reaches ${farthest.toExponential(3)} ms, beyond the ${MAX_EVENT_TIME_MS} ms (about 31 years) a trace holds for baton trace to read back; lower the profile's durations, --jitter-scale or --microbatches`,
    );
  const clock = traceClock(origin);
  const out = stageTrackEvents(events, taskStarts(events), clock);
  const { messages, lanes } = messageEvents(events, clock);
  out.push(...messages, ...trackNames(stages, lanes));
  const rank = (e: ChromeEvent) => (e.ph === 'M' ? 0 : 1);
  out.sort((a, b) => rank(a) - rank(b) || a.ts - b.ts);
  return {
    traceEvents: out,
    displayTimeUnit: 'ms',
    metadata: { ...meta, generator: 'baton', time_origin_ms: origin, baton_events: [...events] },
  };
}

/** The start of each task-end's task; throws TraceBuildError for an end without its start or a task never ended. */
function taskStarts(events: readonly BatonEvent[]): Map<TaskEndEvent, TaskStartEvent> {
  const { spans, open } = pairTaskEvents(events, {
    unstarted: (e) => {
      throw new TraceBuildError(
        `stage ${e.stage}, iteration ${e.iteration}: task-end of ${formatTask(e)} at ${e.t} ms without its task-start`,
      );
    },
  });
  if (open.length > 0) {
    const first = open[0];
    throw new TraceBuildError(
      `${open.length} task(s) started but never ended, e.g. stage ${first.stage}, iteration ${first.iteration}: ${formatTask(first)} at ${first.t} ms`,
    );
  }
  return new Map(spans.map(({ start, end }) => [end, start]));
}

/** The compute and waits tracks, in the order of the events: tasks, in-flight samples, waits, rejects, iteration marks. */
function stageTrackEvents(
  events: readonly BatonEvent[],
  startOf: Map<TaskEndEvent, TaskStartEvent>,
  { rel, span }: TraceClock,
): ChromeEvent[] {
  const out: ChromeEvent[] = [];
  for (const e of events) {
    const pid = stagePid(e.stage);
    // A marker on the compute track: 't' spans the thread, 'p' the stage's whole process.
    const instant = (name: string, cat: string, scope: 't' | 'p', args: Record<string, unknown>): ChromeEvent => ({
      name,
      cat,
      ph: 'i',
      s: scope,
      ts: rel(e.t),
      pid,
      tid: TID.compute,
      args,
    });
    switch (e.type) {
      case 'task-start':
        out.push({ name: 'in-flight', ph: 'C', ts: rel(e.t), pid, tid: TID.compute, args: { forwards: e.inflight } });
        break;
      case 'task-end': {
        const start = startOf.get(e) as TaskStartEvent;
        out.push({
          name: formatTask(e),
          cat: e.kind,
          ph: 'X',
          ...span(start.t, e.t),
          pid,
          tid: TID.compute,
          args: {
            iteration: e.iteration,
            microbatch: e.mb,
            chunk: e.chunk,
            inflight: start.inflight,
            backpressure: start.backpressure,
          },
        });
        break;
      }
      case 'wait':
        out.push({
          name: e.reason,
          cat: 'wait',
          ph: 'X',
          ...span(e.t, e.t + e.ms),
          pid,
          tid: TID.waits,
          args: { iteration: e.iteration, ms: e.ms },
        });
        break;
      case 'reject':
        out.push(instant(`reject: ${e.reason}`, 'reject', 't', { iteration: e.iteration, detail: e.detail }));
        break;
      case 'policy-swap':
        out.push(
          instant(`swap ${e.what}: ${e.from} -> ${e.to}`, 'swap', 'p', {
            swap: e.swap,
            iteration: e.iteration,
            tasks: e.tasks,
          }),
        );
        break;
      case 'iteration-start':
      case 'iteration-end':
        out.push(instant(`${e.type} ${e.iteration}`, 'iteration', 'p', { iteration: e.iteration }));
        break;
    }
  }
  return out;
}

/** Process and thread names and their order: compute, the comm lanes, waits. */
function trackNames(stages: number, lanes: Map<number, number>): ChromeEvent[] {
  const out: ChromeEvent[] = [];
  for (let s = 0; s < stages; s++) {
    const pid = stagePid(s);
    out.push({ name: 'process_name', ph: 'M', ts: 0, pid, tid: TID.compute, args: { name: `stage ${s}` } });
    out.push({ name: 'process_sort_index', ph: 'M', ts: 0, pid, tid: TID.compute, args: { sort_index: s } });
    const threads: [string, number][] = [['compute', TID.compute]];
    for (let l = 0; l < Math.max(1, lanes.get(s) ?? 0); l++)
      threads.push([l === 0 ? 'comm' : `comm ${l + 1}`, commTid(l)]);
    threads.push(['waits', TID.waits]);
    threads.forEach(([name, tid], i) => {
      out.push({ name: 'thread_name', ph: 'M', ts: 0, pid, tid, args: { name } });
      out.push({ name: 'thread_sort_index', ph: 'M', ts: 0, pid, tid, args: { sort_index: i } });
    });
  }
  return out;
}
