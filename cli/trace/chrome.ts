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
// and 4, 5, … (further comm lanes). Reading a trace back goes by the process and thread
// names, so traces written with the earlier numbering (stage s as pid s, tids 0, 1, 2)
// read back the same.

import * as fs from 'fs';
import {
  BatonEvent,
  MAX_EVENT_TIME_MS,
  ReceiveEvent,
  SendEvent,
  TaskStartEvent,
  WaitEvent,
  eventProblem,
} from '../../stage/events';
import { SHAPE_LIMITS, TaskKind } from '../../policies/task';

export interface ChromeEvent {
  name: string;
  ph: string;
  ts: number;
  pid: number;
  tid: number;
  cat?: string;
  dur?: number;
  id?: number | string;
  bp?: 'e';
  s?: 'g' | 'p' | 't';
  args?: Record<string, unknown>;
}

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

export const TID = { compute: 1, comm: 2, waits: 3 } as const;

/** The process of a stage's tracks. */
export function stagePid(stage: number): number {
  return stage + 1;
}

/** The thread of a stage's comm lane `lane` (0 is TID.comm; further lanes come after the waits). */
export function commTid(lane: number): number {
  return lane === 0 ? TID.comm : TID.waits + lane;
}

export function taskName(kind: string, mb: number, chunk: number): string {
  return chunk === 0 ? `${kind}${mb}` : `${kind}${mb}@${chunk}`;
}

/** Key under which a send and its receive meet: the message's identity and route. */
function messageKey(iteration: number, kind: string, mb: number, chunk: number, src: number, dst: number): string {
  return `${iteration}|${kind}|${mb}|${chunk}|${src}>${dst}`;
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
  // Integer nanoseconds since the origin: a start and the end before it meet exactly.
  const ns = (t: number) => Math.round((t - origin) * 1e6);
  const rel = (t: number) => ns(t) / 1e3;
  const span = (from: number, to: number) => ({ ts: rel(from), dur: Math.max(0, ns(to) - ns(from)) / 1e3 });
  const out: ChromeEvent[] = [];
  const open = new Map<string, TaskStartEvent>();
  const sends = new Map<string, SendEvent[]>();
  const receives: ReceiveEvent[] = [];
  let flowId = 0;
  for (const e of events) {
    switch (e.type) {
      case 'task-start':
        open.set(`${e.stage}|${e.iteration}|${e.kind}|${e.mb}|${e.chunk}`, e);
        out.push({
          name: 'in-flight',
          ph: 'C',
          ts: rel(e.t),
          pid: stagePid(e.stage),
          tid: TID.compute,
          args: { forwards: e.inflight },
        });
        break;
      case 'task-end': {
        const key = `${e.stage}|${e.iteration}|${e.kind}|${e.mb}|${e.chunk}`;
        const start = open.get(key);
        if (!start)
          throw new TraceBuildError(
            `stage ${e.stage}, iteration ${e.iteration}: task-end of ${taskName(e.kind, e.mb, e.chunk)} at ${e.t} ms without its task-start`,
          );
        open.delete(key);
        out.push({
          name: taskName(e.kind, e.mb, e.chunk),
          cat: e.kind,
          ph: 'X',
          ...span(start.t, e.t),
          pid: stagePid(e.stage),
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
      case 'send': {
        const key = messageKey(e.iteration, e.kind, e.mb, e.chunk, e.stage, e.dst);
        const q = sends.get(key);
        if (q) q.push(e);
        else sends.set(key, [e]);
        break;
      }
      case 'receive':
        receives.push(e);
        break;
      case 'wait':
        out.push({
          name: e.reason,
          cat: 'wait',
          ph: 'X',
          ...span(e.t, e.t + e.ms),
          pid: stagePid(e.stage),
          tid: TID.waits,
          args: { iteration: e.iteration, ms: e.ms },
        });
        break;
      case 'reject':
        out.push({
          name: `reject: ${e.reason}`,
          cat: 'reject',
          ph: 'i',
          s: 't',
          ts: rel(e.t),
          pid: stagePid(e.stage),
          tid: TID.compute,
          args: { iteration: e.iteration, detail: e.detail },
        });
        break;
      case 'iteration-start':
      case 'iteration-end':
        out.push({
          name: `${e.type} ${e.iteration}`,
          cat: 'iteration',
          ph: 'i',
          s: 'p',
          ts: rel(e.t),
          pid: stagePid(e.stage),
          tid: TID.compute,
          args: { iteration: e.iteration },
        });
        break;
    }
  }
  if (open.size > 0) {
    const [first] = open.values();
    throw new TraceBuildError(
      `${open.size} task(s) started but never ended, e.g. stage ${first.stage}, iteration ${first.iteration}: ${taskName(first.kind, first.mb, first.chunk)} at ${first.t} ms`,
    );
  }
  const messages: { s: SendEvent; r: ReceiveEvent; lane: number }[] = [];
  for (const r of receives) {
    // Inputs from outside the pipeline (src < 0, the data feed) have no send to pair with.
    const s = sends.get(messageKey(r.iteration, r.kind, r.mb, r.chunk, r.src, r.stage))?.shift();
    if (s) messages.push({ s, r, lane: 0 });
  }
  // Each message takes the first lane of its sender that is free when it is sent (a
  // message ending as another starts leaves the lane free, as Perfetto reads it).
  const laneEnds = new Map<number, number[]>();
  messages.sort((a, b) => a.s.t - b.s.t);
  for (const m of messages) {
    const ends = laneEnds.get(m.s.stage) ?? [];
    laneEnds.set(m.s.stage, ends);
    const start = ns(m.s.t);
    const lane = ends.findIndex((end) => end <= start);
    m.lane = lane < 0 ? ends.length : lane;
    ends[m.lane] = Math.max(start, ns(m.r.t));
  }
  for (const { s, r, lane } of messages) {
    const id = ++flowId;
    const name = `${r.kind} mb${r.mb}${r.chunk === 0 ? '' : `@${r.chunk}`} ${s.stage}→${r.stage}`;
    const args = {
      iteration: r.iteration,
      microbatch: r.mb,
      chunk: r.chunk,
      src: s.stage,
      dst: r.stage,
      seq: s.seq,
      bytes: s.bytes,
      latency_ms: r.latency,
    };
    const tid = commTid(lane);
    out.push({ name, cat: r.kind, ph: 'X', ...span(s.t, r.t), pid: stagePid(s.stage), tid, args });
    out.push({ name, cat: r.kind, ph: 's', id, ts: rel(s.t), pid: stagePid(s.stage), tid });
    // The arrival marker gives the flow's end a slice to bind to on the receiver's track.
    out.push({
      name: `arrive ${name}`,
      cat: r.kind,
      ph: 'i',
      s: 't',
      ts: rel(Math.max(r.t, s.t)),
      pid: stagePid(r.stage),
      tid: TID.comm,
      args,
    });
    out.push({
      name,
      cat: r.kind,
      ph: 'f',
      bp: 'e',
      id,
      ts: rel(Math.max(r.t, s.t)),
      pid: stagePid(r.stage),
      tid: TID.comm,
    });
  }
  for (let s = 0; s < stages; s++) {
    const pid = stagePid(s);
    out.push({ name: 'process_name', ph: 'M', ts: 0, pid, tid: TID.compute, args: { name: `stage ${s}` } });
    out.push({ name: 'process_sort_index', ph: 'M', ts: 0, pid, tid: TID.compute, args: { sort_index: s } });
    const lanes = Math.max(1, laneEnds.get(s)?.length ?? 0);
    const threads: [string, number][] = [['compute', TID.compute]];
    for (let l = 0; l < lanes; l++) threads.push([l === 0 ? 'comm' : `comm ${l + 1}`, commTid(l)]);
    threads.push(['waits', TID.waits]);
    threads.forEach(([name, tid], i) => {
      out.push({ name: 'thread_name', ph: 'M', ts: 0, pid, tid, args: { name } });
      out.push({ name: 'thread_sort_index', ph: 'M', ts: 0, pid, tid, args: { sort_index: i } });
    });
  }
  const rank = (e: ChromeEvent) => (e.ph === 'M' ? 0 : 1);
  out.sort((a, b) => rank(a) - rank(b) || a.ts - b.ts);
  return {
    traceEvents: out,
    displayTimeUnit: 'ms',
    metadata: { ...meta, generator: 'baton', time_origin_ms: origin, baton_events: [...events] },
  };
}

/** How much JSON text writeChromeTrace gathers before it writes (characters). */
const WRITE_CHUNK_CHARS = 1 << 20;

/**
 * Writes the trace as JSON.stringify would, an event at a time: a long run's trace is more
 * text than one string can hold (V8's limit is about 512 MiB; JSON.stringify of a
 * 524,288-task run threw "Invalid string length" after the run, losing its results).
 */
export function writeChromeTrace(file: string, trace: ChromeTrace): void {
  const { baton_events: embedded, ...meta } = trace.metadata;
  const fd = fs.openSync(file, 'w');
  try {
    let chunk: string[] = [];
    let size = 0;
    const flush = () => {
      fs.writeSync(fd, chunk.join(''));
      chunk = [];
      size = 0;
    };
    const put = (s: string) => {
      chunk.push(s);
      size += s.length;
      if (size >= WRITE_CHUNK_CHARS) flush();
    };
    const list = (items: readonly unknown[]) => items.forEach((x, i) => put(`${i > 0 ? ',' : ''}${JSON.stringify(x)}`));
    put('{"traceEvents":[');
    list(trace.traceEvents);
    // The metadata's own fields, then the embedded events as its last field.
    put(
      `],"displayTimeUnit":${JSON.stringify(trace.displayTimeUnit)},"metadata":${JSON.stringify(meta).slice(0, -1)},"baton_events":[`,
    );
    list(embedded);
    put(']}}');
    flush();
  } finally {
    fs.closeSync(fd);
  }
}

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

// Phases of the Trace Event Format: duration, complete, instant, counter, async
// (nestable and legacy), flow, sample, object, metadata, memory dump, mark, context.
const KNOWN_PH = new Set([
  'B',
  'E',
  'X',
  'i',
  'I',
  'C',
  'b',
  'n',
  'e',
  'S',
  'T',
  'p',
  'F',
  's',
  't',
  'f',
  'P',
  'N',
  'O',
  'D',
  'M',
  'V',
  'v',
  'R',
  'c',
  '(',
  ')',
]);
const FLOW_PH = new Set(['s', 't', 'f']);
const ASYNC_PH = new Set(['b', 'n', 'e', 'S', 'T', 'p', 'F']);
const METADATA_ARG: Record<string, [string, 'string' | 'number']> = {
  process_name: ['name', 'string'],
  thread_name: ['name', 'string'],
  process_labels: ['labels', 'string'],
  process_sort_index: ['sort_index', 'number'],
  thread_sort_index: ['sort_index', 'number'],
};

const isNum = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const quote = (v: unknown) => (v === undefined ? 'nothing' : JSON.stringify(v));

/** Schema problems of a Trace Event Format document (JSON object or array form); empty when valid. */
/** Baton's own metadata (the embedded events and the stage count), read back by summary and gantt. */
function batonMetadataProblems(meta: Record<string, unknown>): string[] {
  const problems: string[] = [];
  if (
    meta.stages !== undefined &&
    !(
      Number.isSafeInteger(meta.stages) &&
      (meta.stages as number) >= 1 &&
      (meta.stages as number) <= SHAPE_LIMITS.stages
    )
  )
    problems.push(`metadata.stages must be an integer from 1 to ${SHAPE_LIMITS.stages}, got ${quote(meta.stages)}`);
  for (const key of ['title', 'job'])
    if (meta[key] !== undefined && typeof meta[key] !== 'string')
      problems.push(`metadata.${key} must be a string, got ${quote(meta[key])}`);
  if (meta.config !== undefined && !isObj(meta.config))
    problems.push(`metadata.config must be an object, got ${quote(meta.config)}`);
  const events = meta.baton_events;
  if (events === undefined) return problems;
  if (!Array.isArray(events)) return [...problems, `metadata.baton_events must be an array, got ${quote(events)}`];
  events.forEach((e, i) => {
    const p = eventProblem(e);
    if (p) problems.push(`metadata.baton_events[${i}]: ${p}`);
    else if ((e as BatonEvent).stage >= SHAPE_LIMITS.stages)
      problems.push(`metadata.baton_events[${i}]: stage ${(e as BatonEvent).stage} is over ${SHAPE_LIMITS.stages - 1}`);
  });
  return problems;
}

export function checkChromeTrace(json: unknown): string[] {
  const problems: string[] = [];
  let events: unknown[];
  if (Array.isArray(json)) events = json;
  else if (isObj(json)) {
    if (!Array.isArray(json.traceEvents))
      return [`top level: traceEvents must be an array, got ${quote(json.traceEvents)}`];
    events = json.traceEvents;
    if (json.displayTimeUnit !== undefined && json.displayTimeUnit !== 'ms' && json.displayTimeUnit !== 'ns')
      problems.push(`top level: displayTimeUnit must be "ms" or "ns", got ${quote(json.displayTimeUnit)}`);
    if (json.metadata !== undefined && !isObj(json.metadata))
      problems.push(`top level: metadata must be an object, got ${quote(json.metadata)}`);
    else if (isObj(json.metadata)) problems.push(...batonMetadataProblems(json.metadata));
  } else return [`top level: expected an object with traceEvents or an array of events, got ${quote(json)}`];

  const flows = new Map<string, { start?: number; finish?: number; at: number }>();
  events.forEach((raw, i) => {
    if (!isObj(raw)) {
      problems.push(`traceEvents[${i}]: an event must be an object, got ${quote(raw)}`);
      return;
    }
    const ph = raw.ph;
    const where = `traceEvents[${i}] (ph ${quote(ph)}, name ${quote(raw.name)})`;
    const bad = (what: string, v: unknown) => problems.push(`${where}: ${what}, got ${quote(v)}`);
    if (typeof ph !== 'string' || !KNOWN_PH.has(ph)) {
      bad(`ph must be one of ${[...KNOWN_PH].join(' ')}`, ph);
      return;
    }
    if (ph !== 'E' && typeof raw.name !== 'string') bad('name must be a string', raw.name);
    if (ph !== 'M' || raw.ts !== undefined)
      if (!isNum(raw.ts)) bad('ts must be a finite number (microseconds)', raw.ts);
    if (!isNum(raw.pid)) bad('pid must be a number', raw.pid);
    if (ph !== 'C' || raw.tid !== undefined) if (!isNum(raw.tid)) bad('tid must be a number', raw.tid);
    if (raw.cat !== undefined && typeof raw.cat !== 'string') bad('cat must be a string', raw.cat);
    if (raw.args !== undefined && !isObj(raw.args)) bad('args must be an object', raw.args);
    if (ph === 'X' && !(isNum(raw.dur) && raw.dur >= 0)) bad('a complete event needs dur >= 0', raw.dur);
    if ((ph === 'i' || ph === 'I') && raw.s !== undefined && !['g', 'p', 't'].includes(raw.s as string))
      bad('instant scope s must be g, p or t', raw.s);
    if (ph === 'C') {
      if (!isObj(raw.args) || Object.keys(raw.args).length === 0)
        bad('a counter needs args with at least one series', raw.args);
      else
        for (const [k, v] of Object.entries(raw.args))
          if (!isNum(v)) bad(`counter series ${JSON.stringify(k)} must be a number`, v);
    }
    if (ASYNC_PH.has(ph) && (raw.id === undefined || raw.id === null) && raw.id2 === undefined)
      bad('an async event needs an id', raw.id);
    if (FLOW_PH.has(ph)) {
      if (typeof raw.id !== 'number' && typeof raw.id !== 'string') {
        bad('a flow event needs an id (number or string)', raw.id);
        return;
      }
      if (ph === 'f' && raw.bp !== undefined && raw.bp !== 'e') bad('flow end binding point bp must be "e"', raw.bp);
      const key = `${raw.cat ?? ''}|${raw.id}`;
      const f = flows.get(key) ?? { at: i };
      if (ph === 's') {
        if (f.start !== undefined) bad(`flow id ${raw.id} starts twice (first at traceEvents[${f.at}])`, raw.id);
        f.start = raw.ts as number;
      } else if (ph === 'f') {
        if (f.finish !== undefined) bad(`flow id ${raw.id} finishes twice`, raw.id);
        f.finish = raw.ts as number;
      }
      flows.set(key, f);
    }
    if (ph === 'M') {
      const spec = Object.prototype.hasOwnProperty.call(METADATA_ARG, raw.name as string)
        ? METADATA_ARG[raw.name as string]
        : undefined;
      if (spec) {
        const v = isObj(raw.args) ? raw.args[spec[0]] : undefined;
        if (typeof v !== spec[1]) bad(`metadata ${raw.name} needs args.${spec[0]} as a ${spec[1]}`, v);
      }
    }
  });
  for (const [key, f] of flows) {
    const id = key.slice(key.indexOf('|') + 1);
    if (f.start === undefined)
      problems.push(`flow id ${id} (cat ${JSON.stringify(key.split('|')[0])}): finish or step without a start`);
    else if (f.finish === undefined)
      problems.push(`flow id ${id} (cat ${JSON.stringify(key.split('|')[0])}): start without a finish`);
    else if (f.finish < f.start)
      problems.push(`flow id ${id}: finishes at ${f.finish} us before it starts at ${f.start} us`);
  }
  return problems;
}
