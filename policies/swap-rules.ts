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
  /** T, ranks per stage, and D, replicas of the pipeline (absent: 1). */
  readonly tp?: number;
  readonly dp?: number;
}

/**
 * Why a job of T > 1 ranks or D > 1 replicas takes no swap, or null. A TP group's ranks would
 * have to adopt a swap at the same collective-relevant task count on every rank (else their
 * agree/defer rounds see different picks); that is not coordinated yet, and the policy actor
 * addresses each stage's plain subjects, not its lanes.
 */
export function wideJobSwapProblem(job: JobPosition): string | null {
  const tp = job.tp ?? 1;
  const dp = job.dp ?? 1;
  if (tp === 1 && dp === 1) return null;
  return `policy swaps are not supported in a job with --tp ${tp} --dp ${dp} yet (the ranks of a tensor-parallel group would have to adopt a swap at the same task count, which is not coordinated); run it with --tp 1 --dp 1 to swap`;
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
  const wide = wideJobSwapProblem(job);
  if (wide !== null) return { accepted: false, reason: wide };
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
