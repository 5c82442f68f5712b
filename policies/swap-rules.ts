// Whether a job takes a policy swap, and from which iteration: a pure function of the
// policy in force (the last one the job accepted), the new one, and where the job is.
// The policy actor (actors/policy-actor.ts) asks it; the stages then adopt the swap at its
// safe point (stage/policy-swap.ts). Nothing here resolves names or loads modules.

import { HintPolicy } from './hint';
import { PipelineShape, ShapeError } from './task';

export interface JobPosition {
  readonly mode: 'sync' | 'async';
  /** The first iteration no stage has started (the next boundary). */
  readonly nextIteration: number;
  /** The job's last iteration. */
  readonly lastIteration: number;
}

export type SwapDecision =
  { readonly accepted: true; readonly atIteration?: number } | { readonly accepted: false; readonly reason: string };

/** Accept `to` in place of `from`, or say why not. `atIteration` (asked for, or set here for a binding change) is when the stages adopt it. */
export function decideSwap(
  from: HintPolicy,
  to: HintPolicy,
  shape: PipelineShape,
  job: JobPosition,
  asked?: { atIteration?: number },
): SwapDecision {
  try {
    to.check(shape);
  } catch (err) {
    if (err instanceof ShapeError) return { accepted: false, reason: `${to.name} cannot run this job: ${err.message}` };
    throw err;
  }
  const boundary = from.binding || to.binding;
  if (boundary && job.mode === 'async')
    return {
      accepted: false,
      reason: `asynchronous mode runs one continuous iteration, so a swap into or out of a binding schedule (${from.name} -> ${to.name}) has no iteration boundary to wait for`,
    };
  const at = asked?.atIteration ?? (boundary ? job.nextIteration : undefined);
  if (at !== undefined && at > job.lastIteration)
    return {
      accepted: false,
      reason: `${from.name} -> ${to.name} waits for the start of iteration ${at}, and the job's last iteration is ${job.lastIteration}`,
    };
  if (at !== undefined && asked?.atIteration !== undefined && at < job.nextIteration)
    return {
      accepted: false,
      reason: `iteration ${at} has already started (the next to start is ${job.nextIteration})`,
    };
  return at === undefined ? { accepted: true } : { accepted: true, atIteration: at };
}
