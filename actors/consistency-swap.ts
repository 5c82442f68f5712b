// A parameter store's switch of consistency policy while the stream runs (a `baton policy
// set --consistency` swap). Safe point: the new policy watches every forward from the swap's
// arrival (its layer inputs, as it would have from the start) while the old one goes on
// making the updates; once every microbatch that was in flight at the arrival has had its
// backward, every microbatch in flight is one the new policy saw, and from the next update
// on the new policy is in force. So the switch waits at most the stage's in-flight count of
// updates. The weights of forwards during the wait are the old policy's.

import { ConsistencyPolicy, LayerInput } from '../policies/consistency/policy';
import { CapturedLinearInput } from '../models/layers';
import { AsyncSettings, ConsistencyName } from './param-store-policy';

export interface ConsistencySwap {
  readonly swap: number;
  readonly to: ConsistencyName;
  readonly settings: AsyncSettings;
  /** Made at the first forward after the arrival (FRESCO needs that forward's layer shapes). */
  policy: ConsistencyPolicy | null;
  /** Microbatches in flight at the arrival whose backward has not run. */
  readonly waitingFor: Set<number>;
}

/** One consistency policy's time in force at a stage: from which update on. */
export interface ConsistencyEra {
  readonly policy: string;
  readonly fromUpdate: number;
  readonly swap: number | null;
}

export function beginSwap(
  swap: number,
  to: ConsistencyName,
  settings: AsyncSettings,
  inFlight: Iterable<number>,
): ConsistencySwap {
  return { swap, to, settings: { ...settings, consistency: to }, policy: null, waitingFor: new Set(inFlight) };
}

/** The new policy sees a forward, made first if it is the first one. */
export function watchForward(
  sw: ConsistencySwap,
  mb: number,
  inputs: readonly CapturedLinearInput[] | undefined,
  make: (settings: AsyncSettings, inputs?: readonly CapturedLinearInput[]) => ConsistencyPolicy,
): void {
  sw.policy ??= make(sw.settings, inputs);
  sw.policy.forward(mb, new Map<string, LayerInput>((inputs ?? []).map((i) => [i.weight, { x: i.x, n: i.n }])));
}

/** The backward of `mb` ran (before its update, which the old policy still makes). */
export function watchBackward(sw: ConsistencySwap, mb: number): void {
  // One forwarded since the arrival: the new policy no longer protects it either.
  if (!sw.waitingFor.delete(mb)) sw.policy?.backward(mb);
}

/** Whether the new policy can take over from the next update (a counting store, without parameters, makes none). */
export function adoptable(sw: ConsistencySwap, counting: boolean): boolean {
  return sw.waitingFor.size === 0 && (sw.policy !== null || counting);
}
