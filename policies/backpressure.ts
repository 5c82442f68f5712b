// Buffer backpressure (RRFP appendix C.2): the drain rule that bounds the forwards in
// flight at a stage; arbiter.ts applies it to a non-binding policy.
//
// While ctx.inflight >= limit the stage is in backpressure mode:
// - one chunk per stage (V = 1): backward-only drain. Run B[0] if a backward is
//   ready, else W[0] if a weight task is ready, else wait. Never a forward.
// - interleaved (V > 1): focused microbatch-by-microbatch drain. The target is the
//   next unrun task of the lowest microbatch that still has one, in the order
//   F@0 .. F@(V-1), B@(V-1) .. B@0, and with split backward then W@(V-1) .. W@0.
//   Run the target if it is ready; else a ready W (W[0]); else wait.
//   W belongs to the focus order because, with split backward, a microbatch's
//   memory is released by its W: without it the drain could finish the B's of
//   microbatch after microbatch and hold them all (the bound below would not hold).
//   The W's come after all B's of the microbatch so its gradients reach upstream
//   first; a W is also run whenever the target is not ready, which is where they
//   usually run. W never blocks: it depends only on its own B, nothing waits on it.
// In-flight bound: never above `limit` with V = 1, at most `limit + V` interleaved
// (one focused microbatch can add V forwards before its backwards release them).
// Below the limit the wrapped policy decides. The wrapped policy's memo is advanced
// for every task, whichever rule chose it.
//
// Binding schedules are never wrapped: they keep their own in-flight counts, and a
// drain could make them run a task out of order.
// Not modelled: memory per microbatch (all forwards count the same), and what
// happens to buffers on other stages.

import { HintPolicy, ReadyView, StageContext } from './hint';
import { readyViewOf } from './hints';
import { PipelineShape, Task, formatTask, task, taskProblem } from './task';
import { InputError } from '../base/errors';

export class BackpressureLimitError extends InputError {
  override name = 'BackpressureLimitError';
  constructor(readonly limit: unknown) {
    super(
      `backpressure limit must be a positive integer (the drain is deadlock-free only then), got ${JSON.stringify(limit)}`,
    );
  }
}

export function checkLimit(limit: number): void {
  if (!Number.isInteger(limit) || limit < 1) throw new BackpressureLimitError(limit);
}

/** True when `policy` at this stage is in backpressure mode (never for a binding policy). */
export function inBackpressure(policy: HintPolicy<any>, ctx: StageContext, limit: number): boolean {
  checkLimit(limit);
  return !policy.binding && ctx.inflight >= limit;
}

/** The next task of the focused drain order at this stage, or null when all ran. The scan
 * starts at ctx.firstUnfinished: from 0 every drain step would cost O(M), O(M²) a run. */
export function focusTarget(ctx: StageContext): Task | null {
  const { chunks: V, microbatches: M } = ctx.shape;
  for (let j = ctx.firstUnfinished ?? 0; j < M; j++) {
    for (let c = 0; c < V; c++) if (!ctx.done(task('F', j, c))) return task('F', j, c);
    for (let c = V - 1; c >= 0; c--) if (!ctx.done(task('B', j, c))) return task('B', j, c);
    if (ctx.shape.splitBackward)
      for (let c = V - 1; c >= 0; c--) if (!ctx.done(task('W', j, c))) return task('W', j, c);
  }
  return null;
}

/** The choice in backpressure mode (see the header); null means wait. */
export function drainChoice(ready: ReadyView, ctx: StageContext): Task | null {
  if (ctx.shape.chunks === 1) return ready.B[0] ?? ready.W[0] ?? null;
  const target = focusTarget(ctx);
  if (target !== null && ready.has(target)) return target;
  return ready.W[0] ?? null;
}

/** One arbitration under backpressure: the drain rule at or above `limit`, else `policy`. */
export function chooseWithBackpressure<M>(
  policy: HintPolicy<M>,
  memo: M,
  ready: ReadyView,
  ctx: StageContext,
  limit: number,
): Task | null {
  return inBackpressure(policy, ctx, limit) ? drainChoice(ready, ctx) : policy.choose(ready, memo, ctx);
}

export class InflightBoundError extends Error {
  override name = 'InflightBoundError';
}

/** A job's buffer limit: one count for every stage, or `depth`: P − s at stage s (1F1B's in-flight count). */
export type BufferLimit = number | 'depth';

/** The limit at `stage` of a pipeline of `stages` stages (throws on a bad limit). */
export function stageBufferLimit(limit: BufferLimit, stage: number, stages: number): number {
  const n = limit === 'depth' ? stages - stage : limit;
  checkLimit(n);
  return n;
}

/**
 * The most forwards that can be in flight at `stage` (F run, memory not yet released)
 * under `policy` with the stage's buffer limit: what asynchronous consistency must
 * cover. A non-binding policy is held to the limit (one chunk per stage; `limit + V`
 * interleaved) and to the forwards there are; a binding schedule ignores the limit, so
 * its own order is replayed, every task ready as soon as its stage-local predecessor ran.
 */
export function inflightBound(policy: HintPolicy<any>, shape: PipelineShape, stage: number, limit: number): number {
  checkLimit(limit);
  const forwards = shape.microbatches * shape.chunks;
  if (!policy.binding) return Math.min(forwards, shape.chunks === 1 ? limit : limit + shape.chunks);
  // The ready set changes by one task per step, so it is kept, not rebuilt (a stream of
  // thousands of microbatches replays in linear time for the fixed schedules, which only
  // ask `has`); the kind lists are built only for a policy that reads them.
  const key = (t: Task) => `${t.kind}${t.mb}.${t.chunk}`;
  const ready = new Map<string, Task>();
  for (let j = 0; j < shape.microbatches; j++)
    for (let c = 0; c < shape.chunks; c++) ready.set(key(task('F', j, c)), task('F', j, c));
  const ran = new Set<string>();
  let lists: ReadyView | null = null;
  const kindLists = (): ReadyView => (lists ??= readyViewOf(ready.values()));
  const view: ReadyView = {
    get F() {
      return kindLists().F;
    },
    get B() {
      return kindLists().B;
    },
    get W() {
      return kindLists().W;
    },
    has: (t) => ready.has(key(t)),
  };
  let inflight = 0;
  let peak = 0;
  const ctx: StageContext = {
    stage,
    shape,
    done: (t) => ran.has(key(t)),
    get inflight() {
      return inflight;
    },
  };
  let memo = policy.start(ctx);
  for (;;) {
    const next = policy.choose(view, memo, ctx);
    if (next === null) return peak;
    const problem = taskProblem(next, shape);
    if (problem !== null)
      throw new InflightBoundError(
        `${policy.name} at stage ${stage} returned something that is not a task of this pipeline (${problem})`,
      );
    if (!view.has(next))
      throw new InflightBoundError(
        `${policy.name} at stage ${stage} picked ${formatTask(next)}, which has run or whose predecessor at the stage has not`,
      );
    ready.delete(key(next));
    ran.add(key(next));
    lists = null;
    if (next.kind === 'F') {
      peak = Math.max(peak, ++inflight);
      ready.set(key(task('B', next.mb, next.chunk)), task('B', next.mb, next.chunk));
    } else if (next.kind === 'B' && shape.splitBackward) {
      ready.set(key(task('W', next.mb, next.chunk)), task('W', next.mb, next.chunk));
    }
    if (next.kind === (shape.splitBackward ? 'W' : 'B')) inflight--;
    memo = policy.advance(memo, next, ctx);
  }
}
