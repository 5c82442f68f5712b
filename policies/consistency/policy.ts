// The interface a parameter-store actor drives to keep an asynchronous pipeline
// consistent. A policy is pure bookkeeping and math: no actors, bus or clock. The
// store owns the parameters (Float32Arrays by name) and calls, per stage:
//
//   F(mb):   w = weightsForForward(mb, ctx)   run the forward with w
//            forward(mb, layerInputs)         after the forward, with each protected
//                                             linear layer's input X (n×din)
//   B(mb):   w = weightsForBackward(mb, ctx)  run the backward (input gradient) with w
//            backward(mb)                     after the last task that needs w
//   update:  Δ = optimizer.propose(params, grads, lr)
//            transformUpdate(Δ, ctx)          in place; ctx.params are still pre-update
//            applyUpdates(params, Δ)
//
// Contract: every change to the parameters goes through transformUpdate first (stash
// snapshots lazily there, PipeMare counts updates there). In the update after B(mb),
// call backward(mb) before transformUpdate: that mb no longer needs protection.
// Maps returned by weightsFor* may be `ctx.params` itself or buffers owned by the
// policy; treat them as read-only and use them before the next call into the policy
// (stash snapshots stay valid until backward(mb)).

import { ParamMap } from '../optim/params';
import type { RunningState } from './running-state';

export interface WeightsContext {
  /** The stage's current parameters. */
  readonly params: ParamMap;
  /** Updates applied so far. */
  readonly step: number;
  /** Learning rate of the next update. */
  readonly lr: number;
}

export interface UpdateContext {
  /** Current parameters, before Δ is applied. */
  readonly params: ParamMap;
  /** 1-based index of this update (PyTorch's optimizer step). */
  readonly step: number;
  /** Learning rate used to propose Δ. */
  readonly lr: number;
}

/** A protected linear layer's input for one microbatch: n rows × din, row-major. */
export interface LayerInput {
  readonly x: Float32Array;
  readonly n: number;
}

export interface ConsistencyPolicy {
  readonly name: 'none' | 'fresco' | 'stash' | 'pipemare' | 'predict' | 'spectrain' | 'lwp' | 'projection-control';
  weightsForForward(mb: number, ctx: WeightsContext): ParamMap;
  forward(mb: number, layerInputs: ReadonlyMap<string, LayerInput>): void;
  weightsForBackward(mb: number, ctx: WeightsContext): ParamMap;
  backward(mb: number): void;
  /** Transforms the proposed updates in place before they are applied. */
  transformUpdate(updates: Map<string, Float32Array>, ctx: UpdateContext): void;
  /** Bytes the policy holds beyond the parameters and optimizer state. */
  extraStateBytes(): number;
  /** What it carries from update to update (running-state.ts), for a snapshot; absent: nothing. */
  runningState?(): RunningState;
  loadRunningState?(s: RunningState): void;
}

export class ConsistencyError extends Error {
  override name = 'ConsistencyError';
}

/** Tracks which microbatches are between their forward and backward, and since which update. */
export class FlightLog {
  private readonly at = new Map<number, number>();

  enter(policy: string, mb: number, step: number): void {
    if (this.at.has(mb))
      throw new ConsistencyError(`${policy}, forward of mb ${mb}: already in flight; in flight: [${this.list()}]`);
    this.at.set(mb, step);
  }

  /** The update count at the mb's forward. */
  since(policy: string, mb: number, what: string): number {
    const s = this.at.get(mb);
    if (s === undefined)
      throw new ConsistencyError(`${policy}, ${what} of mb ${mb}: no forward recorded; in flight: [${this.list()}]`);
    return s;
  }

  leave(policy: string, mb: number): number {
    const s = this.since(policy, mb, 'backward');
    this.at.delete(mb);
    return s;
  }

  values(): IterableIterator<number> {
    return this.at.values();
  }

  get size(): number {
    return this.at.size;
  }

  private list(): string {
    return [...this.at.keys()].join(', ');
  }
}
