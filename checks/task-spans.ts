// Task events paired into spans, under one key per task (taskKey): each task-start with
// the task-end that closes it, in the order of the events. The statistics, the measured
// durations, the Gantt chart and the Chrome trace read spans; validation reads the first
// start and the first end of each task, whatever their order. Pure. What a repeated start
// or an end without its start means is the caller's to say (the chart refuses it, the
// statistics leave it out): the pairing reports it and judges nothing.

import { Task } from '../policies/task';
import { BatonEvent, TaskEndEvent, TaskStartEvent } from '../stage/events';

export type TaskKey = string;

/** The key of task `t` at `stage` in `iteration`: a valid run runs each key once. */
export function taskKey(stage: number, iteration: number, t: Task): TaskKey {
  return `${stage}|${iteration}|${t.kind}|${t.mb}|${t.chunk}`;
}

export interface TaskSpan {
  readonly start: TaskStartEvent;
  readonly end: TaskEndEvent;
}

export interface PairingHooks {
  /** A task-start of a task still open (started, not ended); the later start then replaces the earlier. Default: nothing. */
  restarted?: (open: TaskStartEvent, again: TaskStartEvent) => void;
  /** A task-end of a task that is not open; it makes no span. Default: nothing. */
  unstarted?: (end: TaskEndEvent) => void;
}

export interface PairedTasks {
  /** One span per task-end that closed an open start, in the order of the ends. */
  readonly spans: TaskSpan[];
  /** The starts never ended, in the order their tasks were opened. */
  readonly open: TaskStartEvent[];
}

/** Pairs each task-end with the open start of its task, in the order of the events. */
export function pairTaskEvents(events: readonly BatonEvent[], hooks: PairingHooks = {}): PairedTasks {
  const open = new Map<TaskKey, TaskStartEvent>();
  const spans: TaskSpan[] = [];
  for (const e of events) {
    if (e.type === 'task-start') {
      const key = taskKey(e.stage, e.iteration, e);
      const running = open.get(key);
      if (running) hooks.restarted?.(running, e);
      open.set(key, e);
    } else if (e.type === 'task-end') {
      const key = taskKey(e.stage, e.iteration, e);
      const start = open.get(key);
      if (!start) {
        hooks.unstarted?.(e);
        continue;
      }
      open.delete(key);
      spans.push({ start, end: e });
    }
  }
  return { spans, open: [...open.values()] };
}

export interface FirstTaskEvents {
  readonly starts: Map<TaskKey, TaskStartEvent>;
  readonly ends: Map<TaskKey, TaskEndEvent>;
}

/**
 * Each task's first start and first end, whichever of them comes first in the events;
 * `repeated` hears of every later start or end of a task, in the order of the events.
 * Validation reads this rather than spans: it judges a run, so an end before its start
 * is a finding to report, not a reason to pair the events otherwise.
 */
export function firstTaskEvents(
  events: readonly BatonEvent[],
  repeated: (e: TaskStartEvent | TaskEndEvent) => void = () => {},
): FirstTaskEvents {
  const starts = new Map<TaskKey, TaskStartEvent>();
  const ends = new Map<TaskKey, TaskEndEvent>();
  for (const e of events) {
    if (e.type !== 'task-start' && e.type !== 'task-end') continue;
    const key = taskKey(e.stage, e.iteration, e);
    const seen: Map<TaskKey, BatonEvent> = e.type === 'task-start' ? starts : ends;
    if (seen.has(key)) repeated(e);
    else seen.set(key, e);
  }
  return { starts, ends };
}
