// FRESCO as a ConsistencyPolicy: every task runs on the current weights; each update
// of a protected linear layer is projected onto the complement of the in-flight
// inputs' subspace (fresco.ts). Parameters not listed in `layers` (embeddings, norms,
// anything else) are updated as proposed.
//
// Weight layouts, so the store can keep the model's own tensors:
//   'augmented'  weight is dout×(din+1), bias in the last column, no bias param;
//   'out-in'     weight is dout×din (PyTorch Linear), optional bias [dout];
//   'in-out'     weight is din×dout (tfjs Dense kernel), optional bias [dout].
// All three are projected in place on the update tensors themselves; no dout×(din+1)
// copy is made.
//
// extraStateBytes() is Fresco.extraStateBytes(): the bases of the microbatches in
// flight (d·min(k1, n, d)·4 bytes per layer and mb, k1 = ⌈k/τ⌉) plus one shared
// projection scratch of min(PROJECTION_BLOCK_ROWS, dout)·k Float64s (the largest any
// layer has needed). The protected basis Q and other per-call temporaries are freed
// when the call returns and are not counted (fresco.ts lists them).

import { ParamMap, lookup } from '../optim/params';
import { Fresco, WeightLayout } from './fresco';
import { ConsistencyError, ConsistencyPolicy, LayerInput, UpdateContext, WeightsContext } from './policy';

export interface LinearLayerSpec {
  /** Key of this layer in the layerInputs map given to forward(). */
  readonly layer: string;
  readonly weight: string;
  readonly bias?: string;
  readonly layout: WeightLayout;
  readonly dout: number;
  readonly din: number;
}

export interface FrescoPolicyOptions {
  readonly layers: readonly LinearLayerSpec[];
  /** τ: microbatches in flight at this stage. */
  readonly tau: number;
  /** α, default 0.25. */
  readonly alpha?: number;
}

export class FrescoPolicy implements ConsistencyPolicy {
  readonly name = 'fresco' as const;
  readonly fresco: Fresco;
  private readonly specs: readonly LinearLayerSpec[];

  constructor(opts: FrescoPolicyOptions) {
    this.fresco = new Fresco({ tau: opts.tau, alpha: opts.alpha });
    this.specs = opts.layers;
    for (const s of opts.layers) {
      if (s.layout === 'augmented' && s.bias !== undefined) {
        throw new ConsistencyError(`fresco layer "${s.layer}": layout 'augmented' carries its bias in the weight; got bias param "${s.bias}"`);
      }
      this.fresco.addLayer(s.layer, s.dout, s.din, s.layout === 'augmented' || s.bias !== undefined);
    }
  }

  weightsForForward(_mb: number, ctx: WeightsContext): ParamMap {
    return ctx.params;
  }

  forward(mb: number, layerInputs: ReadonlyMap<string, LayerInput>): void {
    for (const s of this.specs) {
      const input = layerInputs.get(s.layer);
      if (input === undefined) {
        throw new ConsistencyError(`fresco, forward of mb ${mb}: no input for layer "${s.layer}"; got [${[...layerInputs.keys()].join(', ')}]`);
      }
      this.fresco.onForward(s.layer, mb, input.x, input.n);
    }
  }

  weightsForBackward(_mb: number, ctx: WeightsContext): ParamMap {
    return ctx.params;
  }

  backward(mb: number): void {
    for (const s of this.specs) this.fresco.onBackward(s.layer, mb);
  }

  transformUpdate(updates: Map<string, Float32Array>, _ctx: UpdateContext): void {
    for (const s of this.specs) {
      const where = `fresco update of layer "${s.layer}"`;
      const cols = s.layout === 'augmented' ? s.din + 1 : s.din;
      const w = lookup(updates, s.weight, s.dout * cols, where);
      const b = s.bias === undefined ? undefined : lookup(updates, s.bias, s.dout, where);
      this.fresco.projectLayerUpdate(s.layer, s.layout, w, b);
    }
  }

  extraStateBytes(): number {
    return this.fresco.extraStateBytes();
  }
}
