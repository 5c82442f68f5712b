// What the report computes from a run's events (pure): per stage, the share of the
// measured iterations spent busy, waiting for each reason and otherwise idle; and the
// message latencies' histogram. It does not model what the events do not say: idle time
// the stage did not report as a wait is "other idle" (before its first task, after its last).

import { BatonEvent } from '../../stage/events';
import { pairTaskEvents } from '../../checks/task-spans';

export interface StageUse {
  stage: number;
  /** Sum of the measured iterations' makespans (first task start to last task end, over all stages). */
  span_ms: number;
  busy_ms: number;
  /** ms waiting with work left, by reason (nothing-ready, binding, backpressure, tp-defer). */
  wait_ms: Record<string, number>;
  /** The rest of the span: idle without a reported wait. */
  other_idle_ms: number;
}

/** Per stage, what its time in the iterations went to. */
export function stageUse(events: readonly BatonEvent[], stages: number): StageUse[] {
  const bounds = new Map<number, [number, number]>();
  for (const e of events) {
    if (e.type !== 'task-start' && e.type !== 'task-end') continue;
    const b = bounds.get(e.iteration) ?? [Infinity, -Infinity];
    bounds.set(e.iteration, [Math.min(b[0], e.t), Math.max(b[1], e.t)]);
  }
  const span = [...bounds.values()].reduce((a, [s, t]) => a + Math.max(0, t - s), 0);
  const use: StageUse[] = Array.from({ length: stages }, (_, stage) => ({
    stage,
    span_ms: span,
    busy_ms: 0,
    wait_ms: {},
    other_idle_ms: 0,
  }));
  for (const { start, end } of pairTaskEvents(events).spans)
    if (end.stage < stages) use[end.stage].busy_ms += end.t - start.t;
  for (const e of events)
    if (e.type === 'wait' && e.stage < stages)
      use[e.stage].wait_ms[e.reason] = (use[e.stage].wait_ms[e.reason] ?? 0) + e.ms;
  for (const u of use) {
    const waited = Object.values(u.wait_ms).reduce((a, b) => a + b, 0);
    u.other_idle_ms = Math.max(0, u.span_ms - u.busy_ms - waited);
  }
  return use;
}

export interface Histogram {
  /** Lower edges of the bins, ms; the last bin also holds everything above its edge. */
  edges: number[];
  width: number;
  counts: number[];
  total: number;
  median: number;
  p99: number;
  max: number;
}

/** The receive events' latencies (receive time minus send time) in `bins` equal bins up to the 99th percentile. */
export function latencyHistogram(events: readonly BatonEvent[], bins = 24): Histogram {
  const xs = events
    .flatMap((e) => (e.type === 'receive' && Number.isFinite(e.latency) ? [Math.max(0, e.latency)] : []))
    .sort((a, b) => a - b);
  const at = (q: number) => (xs.length === 0 ? 0 : xs[Math.min(xs.length - 1, Math.floor(q * (xs.length - 1)))]);
  const p99 = at(0.99);
  const width = p99 > 0 ? p99 / (bins - 1) : 1;
  const counts = new Array<number>(bins).fill(0);
  for (const x of xs) counts[Math.min(bins - 1, Math.floor(x / width))]++;
  return {
    edges: counts.map((_, i) => i * width),
    width,
    counts,
    total: xs.length,
    median: at(0.5),
    p99,
    max: xs.length ? xs[xs.length - 1] : 0,
  };
}
