// Reading Baton's events back from a Chrome trace file, for `baton trace gantt|summary`:
// the embedded copy when the trace has one, otherwise rebuilt from the complete events
// of the compute, comm and waits tracks, found by the process and thread names (so the
// earlier numbering, stage s as pid s with tids 0, 1, 2, reads back the same). Iteration
// markers, rejects and the in-flight counter are not rebuilt.

import { BatonEvent, WaitEvent, eventProblem } from '../../stage/events';
import { TaskKind } from '../../policies/task';
import { ChromeEvent } from './chrome';

const quote = (v: unknown) => (v === undefined ? 'nothing' : JSON.stringify(v));

/** A trace that is valid Chrome JSON but whose events cannot be read as Baton's. */
export class TraceContentError extends Error {
  override name = 'TraceContentError';
}

type TrackRole = 'compute' | 'comm' | 'waits';
/** The tracks of a trace without thread names: Baton's first numbering. */
const UNNAMED_TRACKS: Record<number, TrackRole> = { 0: 'compute', 1: 'comm', 2: 'waits' };

/** What each process and thread of a trace is, from its process_name ("stage s") and
 * thread_name metadata; a process without a stage name is the stage of its pid. */
function traceLayout(events: readonly ChromeEvent[]): {
  stage: (pid: number) => number;
  role: (pid: number, tid: number) => TrackRole | undefined;
} {
  const stages = new Map<number, number>();
  const roles = new Map<string, TrackRole>();
  for (const e of events) {
    if (e.ph !== 'M') continue;
    const name = (e.args as { name?: unknown } | undefined)?.name;
    if (typeof name !== 'string') continue;
    const stage = e.name === 'process_name' ? /^stage (0|[1-9][0-9]{0,8})$/.exec(name) : null;
    if (stage) stages.set(e.pid, Number(stage[1]));
    const role = e.name === 'thread_name' ? /^(compute|comm|waits)(?: [0-9]+)?$/.exec(name) : null;
    if (role && (role[1] === 'comm' || role[0] === role[1])) roles.set(`${e.pid}|${e.tid}`, role[1] as TrackRole);
  }
  const named = roles.size > 0;
  return {
    stage: (pid) => stages.get(pid) ?? pid,
    role: (pid, tid) =>
      named
        ? roles.get(`${pid}|${tid}`)
        : Object.prototype.hasOwnProperty.call(UNNAMED_TRACKS, tid)
          ? UNNAMED_TRACKS[tid]
          : undefined,
  };
}

/**
 * The Baton events behind a trace: the embedded copy when present (checkChromeTrace has
 * validated it), otherwise rebuilt from the complete events (tasks, waits, messages) and
 * validated as the runtime's own events are; iteration markers and rejects are then lost
 * and times are relative to the trace's origin. Throws TraceContentError naming the
 * first trace event that cannot be read as a Baton event.
 */
export function batonEventsFromTrace(trace: {
  traceEvents: readonly ChromeEvent[];
  metadata?: Record<string, unknown>;
}): BatonEvent[] {
  const embedded = trace.metadata?.baton_events;
  if (Array.isArray(embedded)) return embedded as BatonEvent[];
  const events: BatonEvent[] = [];
  const layout = traceLayout(trace.traceEvents);
  trace.traceEvents.forEach((e, i) => {
    if (e.ph !== 'X') return;
    const a = (e.args ?? {}) as Record<string, number>;
    const t = e.ts / 1000;
    const end = t + (e.dur ?? 0) / 1000;
    const rebuilt: BatonEvent[] = [];
    const role = layout.role(e.pid, e.tid);
    const stage = layout.stage(e.pid);
    if (role === 'compute' && (e.cat === 'F' || e.cat === 'B' || e.cat === 'W')) {
      const base = {
        stage,
        iteration: a.iteration ?? 0,
        kind: e.cat as TaskKind,
        mb: a.microbatch ?? 0,
        chunk: a.chunk ?? 0,
      };
      rebuilt.push({
        type: 'task-start',
        t,
        ...base,
        inflight: a.inflight ?? 0,
        backpressure: Boolean(a.backpressure),
      });
      rebuilt.push({ type: 'task-end', t: end, ...base });
    } else if (role === 'waits') {
      rebuilt.push({
        type: 'wait',
        t,
        stage,
        iteration: a.iteration ?? 0,
        ms: end - t,
        reason: e.name as WaitEvent['reason'],
      });
    } else if (role === 'comm') {
      const m = {
        iteration: a.iteration ?? 0,
        kind: e.cat ?? 'message',
        mb: a.microbatch ?? 0,
        chunk: a.chunk ?? 0,
        seq: a.seq ?? 0,
        bytes: a.bytes ?? 0,
      };
      rebuilt.push({ type: 'send', t, stage: a.src ?? stage, dst: a.dst ?? -1, ...m });
      // Without a destination there is no receiving stage to count it at.
      if (a.dst !== undefined)
        rebuilt.push({ type: 'receive', t: end, stage: a.dst, src: a.src ?? stage, latency: end - t, ...m });
    }
    for (const r of rebuilt) {
      const problem = eventProblem(r);
      if (problem)
        throw new TraceContentError(
          `traceEvents[${i}] (name ${quote(e.name)}, pid ${quote(e.pid)}, tid ${quote(e.tid)}) cannot be read as a Baton event: ${problem} (from its pid and args)`,
        );
      events.push(r);
    }
  });
  return events.sort((x, y) => x.t - y.t);
}
