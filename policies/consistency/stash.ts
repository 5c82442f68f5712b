// Weight stashing (PipeDream): the backward of mb uses exactly the weights its forward
// used. Bookkeeping is copy-on-update: a forward only records the current weight
// version; the weights are copied in transformUpdate, just before they change, and only
// if some in-flight mb still needs that version. Versions shared by several mbs are
// stored once and freed when the last of them runs backward.
//
// Does not model: vertical sync across stages (each stage stashes on its own).

import { ParamMap } from '../optim/params';
import { ConsistencyPolicy, FlightLog, LayerInput, UpdateContext, WeightsContext } from './policy';

export class WeightStash implements ConsistencyPolicy {
  readonly name = 'stash' as const;
  private version = 0;
  private readonly flight = new FlightLog();
  private readonly snapshots = new Map<number, Map<string, Float32Array>>();

  weightsForForward(mb: number, ctx: WeightsContext): ParamMap {
    this.flight.enter('stash', mb, this.version);
    return ctx.params;
  }

  forward(_mb: number, _inputs: ReadonlyMap<string, LayerInput>): void {}

  weightsForBackward(mb: number, ctx: WeightsContext): ParamMap {
    const v = this.flight.since('stash', mb, 'backward');
    return v === this.version ? ctx.params : (this.snapshots.get(v) as Map<string, Float32Array>);
  }

  backward(mb: number): void {
    const v = this.flight.leave('stash', mb);
    for (const other of this.flight.values()) if (other === v) return;
    this.snapshots.delete(v);
  }

  transformUpdate(_updates: Map<string, Float32Array>, ctx: UpdateContext): void {
    let needed = false;
    for (const v of this.flight.values()) if (v === this.version) needed = true;
    if (needed && !this.snapshots.has(this.version)) {
      const copy = new Map<string, Float32Array>();
      for (const [name, p] of ctx.params) copy.set(name, p.slice());
      this.snapshots.set(this.version, copy);
    }
    this.version += 1;
  }

  /** Distinct weight versions held. */
  get versionsHeld(): number {
    return this.snapshots.size;
  }

  extraStateBytes(): number {
    let b = 0;
    for (const s of this.snapshots.values()) for (const p of s.values()) b += p.byteLength;
    return b;
  }
}
