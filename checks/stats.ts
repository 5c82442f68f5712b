// Run statistics from the event stream and the coordinator's iteration records (pure).

import { BatonEvent } from '../stage/events';
import { pairTaskEvents } from './task-spans';

/** The coordinator's record of one iteration (actors/coordinator.ts). */
export interface IterationRecord {
  iteration: number;
  start: number;
  end: number;
  makespan: number;
  /** Per stage: the report body (peak in-flight, counters, ...). */
  reports: Record<string, unknown>[];
}

export interface IterationStats {
  iteration: number;
  makespan_ms: number;
  lower_bound_ms: number;
  /** Which term of the lower bound set it (checks/lower-bound.ts), where the caller says. */
  lower_bound_term?: string;
  efficiency: number;
  bubble_fraction: number;
  /** Per stage: ms spent running tasks. */
  busy_ms: number[];
  /** Per stage: ms idle with work left, by reason. */
  wait_ms: Record<string, number>[];
  /** Per stage: CPU ms spent encoding and decoding messages. */
  messaging_ms: number[];
}

export interface StageTotals {
  peakInflight: number[];
  tasks: number;
  messages: number;
  bytes: number;
  rejected: number;
  /** Messages sent again on a receiver's request (lost ones), in the whole run. */
  resent: number;
}

/** The events of each iteration, in their order: a run's statistics read each iteration's alone. */
export function eventsByIteration(events: readonly BatonEvent[]): Map<number, BatonEvent[]> {
  const out = new Map<number, BatonEvent[]>();
  for (const e of events) {
    const list = out.get(e.iteration);
    if (list) list.push(e);
    else out.set(e.iteration, [e]);
  }
  return out;
}

export function iterationStats(
  rec: IterationRecord,
  events: readonly BatonEvent[],
  stages: number,
  lowerBound: number,
): IterationStats {
  const busy = new Array<number>(stages).fill(0);
  const wait: Record<string, number>[] = Array.from({ length: stages }, () => ({}));
  const messaging = new Array<number>(stages).fill(0);
  const ofIteration = events.filter((e) => e.iteration === rec.iteration);
  for (const { start, end } of pairTaskEvents(ofIteration).spans) busy[end.stage] += end.t - start.t;
  for (const e of ofIteration) {
    if (e.type === 'wait') wait[e.stage][e.reason] = (wait[e.stage][e.reason] ?? 0) + e.ms;
    else if ((e.type === 'send' || e.type === 'receive') && e.cpuMs !== undefined) messaging[e.stage] += e.cpuMs;
  }
  const total = busy.reduce((a, b) => a + b, 0);
  return {
    iteration: rec.iteration,
    makespan_ms: rec.makespan,
    lower_bound_ms: lowerBound,
    efficiency: rec.makespan > 0 ? lowerBound / rec.makespan : 1,
    bubble_fraction: rec.makespan > 0 ? 1 - total / (stages * rec.makespan) : 0,
    busy_ms: busy,
    wait_ms: wait,
    messaging_ms: messaging,
  };
}

/**
 * Tasks, messages, bytes and peak in-flight forwards of the iterations `measured` counts
 * (the warm-up left out); rejections of the whole run, as a bad message belongs to none.
 */
export function totals(
  events: readonly BatonEvent[],
  stages: number,
  measured: (iteration: number) => boolean = () => true,
): StageTotals {
  const peak = new Array<number>(stages).fill(0);
  let tasks = 0;
  let messages = 0;
  let bytes = 0;
  let rejected = 0;
  let resent = 0;
  for (const e of events) {
    if (e.type === 'reject') rejected++;
    else if (e.type === 'resend') resent++;
    else if (!measured(e.iteration)) continue;
    else if (e.type === 'task-start') {
      tasks++;
      if (e.inflight > peak[e.stage]) peak[e.stage] = e.inflight;
    } else if (e.type === 'send') {
      messages++;
      bytes += e.bytes;
    }
  }
  return { peakInflight: peak, tasks, messages, bytes, rejected, resent };
}

export const mean = (xs: readonly number[]): number => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);

export function median(xs: readonly number[]): number {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** A measure's median and range. */
export interface Spread {
  median: number;
  min: number;
  max: number;
}

/** The median and range of `xs` (zeros when there are none). */
export function spread(xs: readonly number[]): Spread {
  if (xs.length === 0) return { median: 0, min: 0, max: 0 };
  return { median: median(xs), min: Math.min(...xs), max: Math.max(...xs) };
}
