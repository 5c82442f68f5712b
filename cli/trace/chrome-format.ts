// The pieces of Baton's Chrome trace that its tracks share (chrome.ts writes the trace,
// chrome-messages.ts its comm lanes): the event record, the process and thread numbering,
// and the clock that puts every time on one nanosecond grid.

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

export const TID = { compute: 1, comm: 2, waits: 3 } as const;

/** The process of a stage's tracks. */
export function stagePid(stage: number): number {
  return stage + 1;
}

/** The thread of a stage's comm lane `lane` (0 is TID.comm; further lanes come after the waits). */
export function commTid(lane: number): number {
  return lane === 0 ? TID.comm : TID.waits + lane;
}

/** Trace times: microseconds since `origin`, put on one nanosecond grid. */
export interface TraceClock {
  /** Integer nanoseconds since the origin: a start and the end before it meet exactly. */
  ns(t: number): number;
  rel(t: number): number;
  span(from: number, to: number): { ts: number; dur: number };
}

export function traceClock(origin: number): TraceClock {
  const ns = (t: number) => Math.round((t - origin) * 1e6);
  const rel = (t: number) => ns(t) / 1e3;
  const span = (from: number, to: number) => ({ ts: rel(from), dur: Math.max(0, ns(to) - ns(from)) / 1e3 });
  return { ns, rel, span };
}
