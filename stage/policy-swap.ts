// Hot swaps of a stage's arbitration policy, as pure bookkeeping over the stage's state:
// which policy is in force, the swaps waiting for their safe point, and the adoption
// itself. The stage logic (stage-logic.ts) calls it at its two safe points; the policy
// actor (actors/policy-actor.ts) decides what to ask for, the stage only when to take it.
//
// Safe points (docs/commands.md, "Hot swaps"):
// - between two hint orders: the stage's next arbitration. The swap is taken as soon as
//   it arrives (the running task, if any, was picked by the old policy and is the last it
//   picks); the new policy's memory is rebuilt as if it had dispatched this iteration's
//   tasks so far, in the order they ran.
// - into or out of a binding schedule: the next iteration boundary (a binding schedule
//   cannot start mid-iteration). A swap ordered for iteration N (`atIteration`, from
//   `--swap-at it=N` or from the policy actor, which names the first iteration no stage
//   has started) waits for the start of iteration N whatever its kind.
// Swaps are taken in the order they came: one waiting for a boundary holds back the later ones.

import { Arbiter } from '../policies/arbiter';
import { Task } from '../policies/task';
import { contextOf } from './readiness';
import { StageEffect, StageState } from './stage-state';

export interface SwapOrder {
  /** The swap's number, given by the job's policy actor. */
  readonly id: number;
  /** The new policy, resolved for this stage (with its buffer limit). */
  readonly arbiter: Arbiter;
  /** Adopt at the start of this iteration (absent: at the policy change's own safe point). */
  readonly atIteration?: number;
}

export interface PolicyInForce {
  arbiter: Arbiter;
  /** Swaps not adopted yet, oldest first. */
  readonly pending: SwapOrder[];
  /** This iteration's dispatched tasks, in order (to rebuild a new policy's memory). */
  readonly dispatched: Task[];
  /** Tasks this stage has dispatched since the job began (where a swap is adopted). */
  tasksRun: number;
}

export type SafePoint = { readonly at: 'arbitration' } | { readonly at: 'boundary'; readonly iteration: number };

export function policyInForce(arbiter: Arbiter): PolicyInForce {
  return { arbiter, pending: [], dispatched: [], tasksRun: 0 };
}

/** A change into or out of a binding schedule waits for an iteration boundary. */
export function needsBoundary(from: Arbiter, to: Arbiter): boolean {
  return from.binding || to.binding;
}

/** Whether `order` may be adopted at `point` while `current` is in force. */
export function adoptableAt(current: Arbiter, order: SwapOrder, point: SafePoint): boolean {
  if (point.at === 'boundary') return order.atIteration === undefined || order.atIteration <= point.iteration;
  return order.atIteration === undefined && !needsBoundary(current, order.arbiter);
}

/** Adopt, in order, every waiting swap that `point` allows; each adoption is a 'policy-swap' event. */
export function adoptSwaps(s: StageState, point: SafePoint, now: number, fx: StageEffect[]): void {
  const p = s.policy;
  while (p.pending.length > 0 && adoptableAt(p.arbiter, p.pending[0], point)) {
    const order = p.pending.shift()!;
    const from = p.arbiter.name;
    p.arbiter = order.arbiter;
    const it = s.current;
    if (point.at === 'arbitration' && it && it.remaining > 0) {
      const ctx = contextOf(s, it);
      let memo = order.arbiter.start(ctx);
      for (const t of p.dispatched) memo = order.arbiter.advance(memo, t, ctx);
      it.memo = memo;
    }
    const iteration = point.at === 'boundary' ? point.iteration : (it?.iteration ?? -1);
    fx.push({
      type: 'event',
      event: {
        type: 'policy-swap',
        t: now,
        stage: s.setup.stage,
        iteration,
        swap: order.id,
        what: 'arbitration',
        from,
        to: order.arbiter.name,
        tasks: p.tasksRun,
      },
    });
  }
}

/** A swap came: queue it and take it now if its safe point is now. */
export function receiveSwap(s: StageState, order: SwapOrder, now: number, fx: StageEffect[]): void {
  s.policy.pending.push(order);
  adoptSwaps(s, { at: 'arbitration' }, now, fx);
}

/** At an iteration's start, before the policy's memory is made: the boundary's swaps. */
export function swapsAtBoundary(s: StageState, iteration: number, now: number, fx: StageEffect[]): void {
  adoptSwaps(s, { at: 'boundary', iteration }, now, fx);
  s.policy.dispatched.length = 0;
}

export function noteDispatched(s: StageState, t: Task): void {
  s.policy.dispatched.push(t);
  s.policy.tasksRun++;
}
