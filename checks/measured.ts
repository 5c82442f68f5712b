// Realized durations read back from a run's events, in the shape the lower bound
// (checks/lower-bound.ts) consumes: how long each task held its stage, and how long
// each message took from send to receive. On the virtual clock these are exactly the
// drawn durations; on the real clock they are what happened, so the bound and the
// efficiency describe the run that was measured. When stages ran on different clocks
// (processes), message times are taken as 0, which keeps the bound valid.

import { PipelineShape, Task, TaskKind, backwardSuccessor, forwardSuccessor } from '../policies/task';
import { BatonEvent } from '../stage/events';
import { TaskKey, pairTaskEvents, taskKey } from './task-spans';

export interface MeasuredDurations {
  readonly shape: PipelineShape;
  compute(iteration: number, stage: number, t: Task): number;
  comm(iteration: number, stage: number, t: Task): number;
}

/** Where a message and its receive meet, and where its transfer time is kept: (iteration, stage, kind, microbatch, chunk). */
const messageKey = (it: number, stage: number, kind: TaskKind | string, mb: number, chunk: number) =>
  `${it}|${stage}|${kind}|${mb}|${chunk}`;

export function measuredDurations(
  events: readonly BatonEvent[],
  shape: PipelineShape,
  sharedClock: boolean,
): MeasuredDurations {
  const busy = new Map<TaskKey, number>();
  for (const { start, end } of pairTaskEvents(events).spans)
    busy.set(taskKey(end.stage, end.iteration, end), end.t - start.t);
  const sent = new Map<string, number>();
  const comm = new Map<string, number>();
  for (const e of events) {
    if (e.type === 'send') sent.set(messageKey(e.iteration, e.dst, e.kind, e.mb, e.chunk), e.t);
    else if (e.type === 'receive' && sharedClock) {
      const t0 = sent.get(messageKey(e.iteration, e.stage, e.kind, e.mb, e.chunk));
      if (t0 !== undefined)
        comm.set(
          messageKey(e.iteration, e.src, e.kind === 'activation' ? 'F' : 'B', e.mb, e.chunk),
          Math.max(0, e.t - t0),
        );
    }
  }
  return {
    shape,
    compute: (it, stage, t) => busy.get(taskKey(stage, it, t)) ?? 0,
    // Keyed by the destination's chunk: the message of F(mb, c) at `stage` lands at its successor's chunk.
    comm: (it, stage, t) => {
      const to = t.kind === 'F' ? forwardSuccessor(stage, t.chunk, shape) : backwardSuccessor(stage, t.chunk, shape);
      return to ? (comm.get(messageKey(it, stage, t.kind, t.mb, to.chunk)) ?? 0) : 0;
    },
  };
}
