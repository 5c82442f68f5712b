// A stage's side of a policy swap: the control message's body checked and its policy
// resolved for this stage (a SwapOrder for the stage logic), and the stage's adoption
// told back to the job's policy actor as an ack (actors/policy-messages.ts).
// A module path is loaded only when the job named it at launch (`allowedModules`): a
// message on the bus never makes a stage run code it was not given.

import { Arbiter, arbiterFor } from '../policies/arbiter';
import { isModulePath, resolvePolicy } from '../policies/registry';
import { PipelineShape } from '../policies/task';
import { quoteValue } from '../base/quote';
import { SwapOrder } from '../stage/policy-swap';
import { BatonEvent, EventSink } from '../stage/events';
import { Bus } from '../transport/bus';
import { encodeValue } from '../transport/codec';
import { launchField } from '../transport/envelope';
import { policySubject } from './policy-messages';
import { CONSISTENCY_POLICIES } from './param-store-policy';
import type { ConsistencyName, StoreMsg } from './param-store';
import { ActorRef, ActorRuntime } from './runtime';

export interface SwapTarget {
  readonly stage: number;
  readonly shape: PipelineShape;
  readonly limit: number;
  /** Module paths this job may swap to (named at launch); built-in names are always allowed. */
  readonly allowedModules: readonly string[];
}

/** The order a swap control body asks for, or the reason it is refused. */
export function swapOrderOf(
  t: SwapTarget,
  body: Readonly<Record<string, unknown>> | undefined,
  cache: Map<string, Arbiter>,
): SwapOrder | string {
  const swap = body?.swap;
  const name = body?.policy;
  const at = body?.atIteration;
  if (!Number.isSafeInteger(swap) || (swap as number) < 0)
    return `swap: field "swap" must be an integer >= 0, got ${quoteValue(swap)}`;
  if (typeof name !== 'string' || name.length === 0 || name.length > 300)
    return `swap: field "policy" must be a policy name, got ${quoteValue(name)}`;
  if (at !== undefined && (!Number.isSafeInteger(at) || (at as number) < 0))
    return `swap: field "atIteration" must be an integer >= 0, got ${quoteValue(at)}`;
  if (isModulePath(name) && !t.allowedModules.includes(name))
    return `swap to module ${quoteValue(name)}: this job was not started with it (--swap-modules), so it is not loaded`;
  let arbiter = cache.get(name);
  if (!arbiter) {
    try {
      const policy = resolvePolicy(name);
      policy.check(t.shape);
      arbiter = arbiterFor(policy, t.limit);
    } catch (err) {
      return `swap to ${quoteValue(name)}: ${(err as Error).message}`;
    }
    cache.set(name, arbiter);
  }
  return { id: swap as number, arbiter, ...(at !== undefined ? { atIteration: at as number } : {}) };
}

/** What is wrong with a consistency swap's body for a job in `mode`, or null. */
export function consistencySwapProblem(body: Readonly<Record<string, unknown>>, mode: 'sync' | 'async'): string | null {
  if (!Number.isSafeInteger(body.swap) || (body.swap as number) < 0)
    return `swap: field "swap" must be an integer >= 0, got ${quoteValue(body.swap)}`;
  if (mode !== 'async') return 'a consistency swap is for an asynchronous job; this one is synchronous';
  if (!(CONSISTENCY_POLICIES as readonly unknown[]).includes(body.consistency))
    return `swap: unknown consistency policy ${quoteValue(body.consistency)}; known: ${CONSISTENCY_POLICIES.join(', ')}`;
  return null;
}

/** `sink`, which also tells the job's policy actor of each swap the stage adopts. */
export function ackingSink(sink: EventSink, bus: Bus, job: string, launch: string | undefined): EventSink {
  return (e: BatonEvent) => {
    sink(e);
    if (e.type === 'policy-swap')
      bus.publish(
        policySubject(job, 'ack'),
        encodeValue({
          verb: 'ack',
          ...launchField(launch),
          stage: e.stage,
          swap: e.swap,
          iteration: e.iteration,
          tasks: e.tasks,
        }),
      );
  };
}

export interface StageSwapWiring {
  readonly runtime: ActorRuntime;
  readonly mode: 'sync' | 'async';
  /** A stage actor of a job with T > 1 or D > 1: it takes no swaps (the policy actor refuses them first). */
  readonly wide: boolean;
  readonly target: SwapTarget;
  /** The stage's parameter store, once its compute made one (asynchronous mode). */
  readonly store: () => ActorRef<StoreMsg> | null;
}

/**
 * How a stage's receiver turns a swap's control body into an order: an arbitration swap is
 * resolved for the stage; a consistency swap goes to its parameter store (null: taken there).
 */
export function stageSwapOrders(
  w: StageSwapWiring,
): (body: Readonly<Record<string, unknown>> | undefined) => SwapOrder | string | null {
  const resolved = new Map<string, Arbiter>();
  return (body) => {
    if (w.wide) return 'a job with --tp or --dp above 1 takes no policy swaps';
    if (body?.consistency === undefined) return swapOrderOf(w.target, body, resolved);
    const problem = consistencySwapProblem(body, w.mode);
    const store = w.store();
    if (problem !== null || !store) return problem ?? 'this stage has no parameter store to swap the consistency of';
    w.runtime.send(store, {
      type: 'swap-consistency',
      swap: body.swap as number,
      to: body.consistency as ConsistencyName,
    });
    return null;
  };
}
