// A fixed per-stage task list used as a policy, in one of two modes.
//
// binding: the stage runs exactly the list, in order; `choose` returns the next
//   not-yet-run task when it is ready and nothing otherwise (the stage waits).
// hint:    the list is only a preference (RRFP section 5): `choose` scans from the
//   first task not yet run and returns the first one that is ready.
//
// The memo holds the list (built once in `start`, frozen, shared between memos), a
// cursor at the first task not yet run, and the positions past the cursor that
// already ran (hint mode runs out of order). `choose` never changes the memo.

import { HintPolicy, ReadyView, StageContext } from './hint';
import { ScheduleBuilder } from './schedules/common';
import { PipelineShape, Task, formatTask, sameTask, taskIndex } from './task';

export interface FixedMemo {
  readonly order: readonly Task[];
  /** Position in `order` of each task, by `taskIndex`; -1 when not in the list. */
  readonly position: readonly number[];
  /** Index of the first task of `order` not yet run. */
  readonly cursor: number;
  /** Positions > cursor that already ran, ascending. */
  readonly ranAhead: readonly number[];
}

export class ScheduleViolationError extends Error {
  override name = 'ScheduleViolationError';
  constructor(
    readonly policy: string,
    readonly stage: number,
    readonly ran: Task,
    readonly reason: string,
  ) {
    super(`stage ${stage}, ${policy}: ran ${formatTask(ran)}, but ${reason}`);
  }
}

export type FixedMode = 'binding' | 'hint';

export function fixedMemo(order: readonly Task[], shape: PipelineShape): FixedMemo {
  const position: number[] = new Array(3 * shape.chunks * shape.microbatches).fill(-1);
  order.forEach((t, i) => (position[taskIndex(t, shape)] = i));
  return { order: Object.freeze([...order]), position: Object.freeze(position), cursor: 0, ranAhead: [] };
}

/** The tasks of the list not yet run, in list order (for traces and errors). */
export function remaining(memo: FixedMemo): Task[] {
  return memo.order.filter((_, i) => i >= memo.cursor && !memo.ranAhead.includes(i));
}

function chooseBinding(ready: ReadyView, memo: FixedMemo): Task | null {
  const next = memo.order[memo.cursor];
  return next !== undefined && ready.has(next) ? next : null;
}

function chooseHint(ready: ReadyView, memo: FixedMemo): Task | null {
  let ahead = 0;
  for (let i = memo.cursor; i < memo.order.length; i++) {
    if (ahead < memo.ranAhead.length && memo.ranAhead[ahead] === i) {
      ahead++;
      continue;
    }
    if (ready.has(memo.order[i])) return memo.order[i];
  }
  return null;
}

function advanceMemo(memo: FixedMemo, ran: Task, ctx: StageContext, policy: string, binding: boolean): FixedMemo {
  const pos = memo.position[taskIndex(ran, ctx.shape)] ?? -1;
  const next = memo.order[memo.cursor];
  const violation = (reason: string) => new ScheduleViolationError(policy, ctx.stage, ran, reason);
  if (pos < 0 || !sameTask(memo.order[pos], ran)) throw violation(`it is not in this stage's schedule`);
  if (pos < memo.cursor || memo.ranAhead.includes(pos)) throw violation('it already ran this iteration');
  if (binding && pos !== memo.cursor)
    throw violation(`the next scheduled task is ${next ? formatTask(next) : 'none (schedule finished)'}`);
  if (pos !== memo.cursor) {
    const ranAhead = [...memo.ranAhead, pos].sort((a, b) => a - b);
    return { ...memo, ranAhead };
  }
  let cursor = memo.cursor + 1;
  let k = 0;
  while (k < memo.ranAhead.length && memo.ranAhead[k] === cursor) {
    cursor++;
    k++;
  }
  return { ...memo, cursor, ranAhead: k === 0 ? memo.ranAhead : memo.ranAhead.slice(k) };
}

/** `name` is `<schedule>` in binding mode and `hint:<schedule>` in hint mode. */
export function fixedPolicy(schedule: ScheduleBuilder, mode: FixedMode): HintPolicy<FixedMemo> {
  const binding = mode === 'binding';
  const name = binding ? schedule.name : `hint:${schedule.name}`;
  return {
    name,
    binding,
    splitBackward: schedule.splitBackward,
    check: (shape) => schedule.check(shape),
    start: (ctx) => fixedMemo(schedule.build(ctx.shape, ctx.stage), ctx.shape),
    choose: (ready, memo) => (binding ? chooseBinding(ready, memo) : chooseHint(ready, memo)),
    advance: (memo, ran, ctx) => advanceMemo(memo, ran, ctx, name, binding),
  };
}
