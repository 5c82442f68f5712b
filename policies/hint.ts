// The arbitration seam: a hint policy is a pure function of (ready set, memory, stage
// context) -> task or nothing. It imports no clock, bus or tfjs.
//
// `choose` must not change the memory: when a TP group defers a task (ranks disagree),
// the arbiter retries with the same memory once readiness changes (RRFP appendix D).
// Only `advance`, called after the chosen task was dispatched, moves the memory on.

import { PipelineShape, Task } from './task';

/**
 * The tasks whose dependencies are satisfied at a stage, in canonical order:
 * forwards by (chunk ascending, microbatch ascending), backwards and weight tasks by
 * (chunk descending, microbatch ascending). So `F[0]` is the forward that frees the
 * pipeline earliest and `B[0]` the backward of the highest chunk.
 */
export interface ReadyView {
  readonly F: readonly Task[];
  readonly B: readonly Task[];
  readonly W: readonly Task[];
  has(t: Task): boolean;
}

export interface StageContext {
  readonly stage: number;
  readonly shape: PipelineShape;
  /** True when `t` already ran at this stage in the current iteration. */
  done(t: Task): boolean;
  /** Forward tasks run here whose memory is not yet released (F done, B — or W when split — not done). */
  readonly inflight: number;
  /** The lowest microbatch with a task not yet run here this iteration (M when every task
   * ran). It only grows within an iteration, so a scan by microbatch may start there;
   * absent means 0. */
  readonly firstUnfinished?: number;
}

export interface HintPolicy<Memo = unknown> {
  readonly name: string;
  /** Binding: wait for exactly the next scheduled task. Non-binding: first ready in hint order. */
  readonly binding: boolean;
  /** The policy needs backward split into B and W (bfw, zb-h1). */
  readonly splitBackward: boolean;
  /** Reject shapes the policy cannot run, with a clear message (throws ShapeError). */
  check(shape: PipelineShape): void;
  /** Fresh memory at the start of an iteration. */
  start(ctx: StageContext): Memo;
  choose(ready: ReadyView, memo: Memo, ctx: StageContext): Task | null;
  advance(memo: Memo, ran: Task, ctx: StageContext): Memo;
}
