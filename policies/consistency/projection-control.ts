// The control for FRESCO's projection (issue #27): FRESCO's update rule applied where
// nothing is in flight, so that what the projection does to the optimizer by itself can
// be told apart from what it does for consistency. Run at P = 1 (one stage, no update
// between any microbatch's forward and backward), each linear layer's update is
// projected as FRESCO would project it at a reference depth, Δ' = Δ(I − QQᵀ), but with
// Q built from the inputs of the τ microbatches that *finished* just before (the most
// recent τ, the current one excluded), τ being the layer's FRESCO τ at the reference
// depth (in-flight bound − 1 of the stage the layer would sit in there). Everything else
// is FRESCO's: α, k = min(τn, ⌈α·min(dout, d)⌉), k1 = ⌈k/τ⌉ directions per microbatch,
// the same basis extraction and merge (fresco.ts). Forwards and backwards run on the
// current weights; a layer whose τ is 0 is updated as proposed.
//
// Extra state: the recent microbatches' bases (as FRESCO's), plus the current
// microbatch's layer inputs until its update (a copy of n×din floats per layer).

import { ParamMap, lookup } from '../optim/params';
import { Fresco } from './fresco';
import { LinearLayerSpec } from './fresco-policy';
import { ConsistencyError, ConsistencyPolicy, LayerInput, UpdateContext, WeightsContext } from './policy';

export interface ProjectionControlOptions {
  readonly layers: readonly LinearLayerSpec[];
  /** τ of each layer (by LinearLayerSpec.layer): how many recent microbatches its updates are projected against. */
  readonly tau: ReadonlyMap<string, number>;
  /** α, default 0.25. */
  readonly alpha?: number;
}

export class ProjectionControl implements ConsistencyPolicy {
  readonly name = 'projection-control' as const;
  readonly fresco: Fresco;
  private readonly specs: readonly LinearLayerSpec[];
  private readonly tau: ReadonlyMap<string, number>;
  /** Per layer, the microbatches whose bases are kept, oldest first. */
  private readonly recent = new Map<string, number[]>();
  /** Inputs of the microbatches whose update has not happened yet, by mb. */
  private readonly pending = new Map<number, ReadonlyMap<string, LayerInput>>();
  private finished: number[] = [];

  constructor(opts: ProjectionControlOptions) {
    this.fresco = new Fresco({ tau: 1, alpha: opts.alpha });
    this.specs = opts.layers;
    this.tau = opts.tau;
    for (const s of opts.layers) {
      const t = opts.tau.get(s.layer);
      if (t === undefined || !(Number.isInteger(t) && t >= 0))
        throw new ConsistencyError(`projection-control layer "${s.layer}": τ must be an integer ≥ 0, got ${t}`);
      this.fresco.addLayer(s.layer, s.dout, s.din, s.layout === 'augmented' || s.bias !== undefined);
      this.recent.set(s.layer, []);
    }
  }

  weightsForForward(_mb: number, ctx: WeightsContext): ParamMap {
    return ctx.params;
  }

  forward(mb: number, layerInputs: ReadonlyMap<string, LayerInput>): void {
    if (this.pending.has(mb)) throw new ConsistencyError(`projection-control, forward of mb ${mb}: already in flight`);
    for (const s of this.specs) {
      const x = layerInputs.get(s.layer);
      if (!x)
        throw new ConsistencyError(
          `projection-control, forward of mb ${mb}: no input for layer "${s.layer}"; got [${[...layerInputs.keys()].join(', ')}]`,
        );
    }
    this.pending.set(mb, new Map([...layerInputs].map(([k, v]) => [k, { x: Float32Array.from(v.x), n: v.n }])));
  }

  weightsForBackward(_mb: number, ctx: WeightsContext): ParamMap {
    return ctx.params;
  }

  backward(mb: number): void {
    if (!this.pending.has(mb))
      throw new ConsistencyError(
        `projection-control, backward of mb ${mb}: no forward recorded; in flight: [${[...this.pending.keys()].join(', ')}]`,
      );
    this.finished.push(mb);
  }

  transformUpdate(updates: Map<string, Float32Array>, _ctx: UpdateContext): void {
    for (const s of this.specs) {
      if ((this.recent.get(s.layer) as number[]).length === 0) continue;
      const where = `projection-control update of layer "${s.layer}"`;
      const cols = s.layout === 'augmented' ? s.din + 1 : s.din;
      const w = lookup(updates, s.weight, s.dout * cols, where);
      const b = s.bias === undefined ? undefined : lookup(updates, s.bias, s.dout, where);
      this.fresco.projectLayerUpdate(s.layer, s.layout, w, b);
    }
    // The microbatches whose backward came before this update join the recent ones now.
    for (const mb of this.finished) {
      const inputs = this.pending.get(mb) as ReadonlyMap<string, LayerInput>;
      this.pending.delete(mb);
      for (const s of this.specs) {
        const tau = this.tau.get(s.layer) as number;
        if (tau === 0) continue;
        const input = inputs.get(s.layer) as LayerInput;
        const queue = this.recent.get(s.layer) as number[];
        this.fresco.onForward(s.layer, mb, input.x, input.n, tau);
        queue.push(mb);
        while (queue.length > tau) this.fresco.onBackward(s.layer, queue.shift() as number);
      }
    }
    this.finished = [];
  }

  /** The microbatches whose inputs layer `layer`'s next update is projected against. */
  recentFor(layer: string): number[] {
    return [...(this.recent.get(layer) ?? [])];
  }

  extraStateBytes(): number {
    let b = this.fresco.extraStateBytes();
    for (const inputs of this.pending.values()) for (const i of inputs.values()) b += i.x.byteLength;
    return b;
  }
}
