// The arbitration seam: where a stage's policy (a hint order or a binding schedule) and
// buffer backpressure (backpressure.ts, RRFP appendix C.2) meet. A stage holds one
// Arbiter (stage/stage-logic.ts `arbitrate` asks it for the next task); the order itself
// comes from hints.ts or, for a fixed schedule, fixed.ts.
//
// Below the stage's buffer limit the policy picks; at or above it a non-binding policy's
// pick is replaced by the drain rule. A binding schedule is never drained: it keeps its own
// in-flight counts, and a drain could make it run a task out of order.

import { checkLimit, chooseWithBackpressure, inBackpressure } from './backpressure';
import { HintPolicy, ReadyView, StageContext } from './hint';
import { Task } from './task';

export interface Arbiter<Memo = unknown> {
  /** The policy's name (errors and traces name it). */
  readonly name: string;
  readonly binding: boolean;
  /** The forwards a stage may hold before it drains (its buffer limit). */
  readonly limit: number;
  /** Fresh memory at the start of an iteration (the policy's). */
  start(ctx: StageContext): Memo;
  /** The task to run now, or null to wait, and whether the stage is draining under backpressure. */
  pick(ready: ReadyView, memo: Memo, ctx: StageContext): { task: Task | null; backpressure: boolean };
  /** The memory after `ran` was dispatched (the policy's, whichever rule picked it). */
  advance(memo: Memo, ran: Task, ctx: StageContext): Memo;
}

/** The arbiter of a stage that runs `policy` with buffer limit `limit` (throws on a bad limit). */
export function arbiterFor<Memo>(policy: HintPolicy<Memo>, limit: number): Arbiter<Memo> {
  checkLimit(limit);
  // Called as the policy's methods: a user module's policy may use `this`.
  return {
    name: policy.name,
    binding: policy.binding,
    limit,
    start: (ctx) => policy.start(ctx),
    pick: (ready, memo, ctx) => ({
      task: chooseWithBackpressure(policy, memo, ready, ctx, limit),
      backpressure: inBackpressure(policy, ctx, limit),
    }),
    advance: (memo, ran, ctx) => policy.advance(memo, ran, ctx),
  };
}
