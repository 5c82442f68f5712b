// FRESCO as a ConsistencyPolicy: every task runs on the current weights; each update
// of a protected linear layer is projected onto the complement of the in-flight
// inputs' subspace (fresco.ts). Parameters not listed in `layers` (embeddings, norms,
// anything else) are updated as proposed.
//
// Weight layouts, so the store can keep the model's own tensors:
//   'augmented'  weight is dout×(din+1), bias in the last column, no bias param;
//   'out-in'     weight is dout×din (PyTorch Linear), optional bias [dout];
//   'in-out'     weight is din×dout (tfjs Dense kernel), optional bias [dout].
// For the last two, Δ is gathered into a dout×d scratch, projected and scattered back.

import { ParamMap, lookup } from '../optim/params';
import { Fresco } from './fresco';
import { ConsistencyError, ConsistencyPolicy, LayerInput, UpdateContext, WeightsContext } from './policy';

export interface LinearLayerSpec {
  /** Key of this layer in the layerInputs map given to forward(). */
  readonly layer: string;
  readonly weight: string;
  readonly bias?: string;
  readonly layout: 'augmented' | 'out-in' | 'in-out';
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
  private readonly scratch = new Map<string, Float32Array>();

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
      const d = s.layout === 'augmented' || s.bias !== undefined ? s.din + 1 : s.din;
      const where = `fresco update of layer "${s.layer}"`;
      if (s.layout === 'augmented') {
        this.fresco.projectUpdate(s.layer, lookup(updates, s.weight, s.dout * d, where));
        continue;
      }
      const w = lookup(updates, s.weight, s.dout * s.din, where);
      const b = s.bias === undefined ? undefined : lookup(updates, s.bias, s.dout, where);
      let full = this.scratch.get(s.layer);
      if (full === undefined) this.scratch.set(s.layer, (full = new Float32Array(s.dout * d)));
      gather(full, w, b, s);
      if (this.fresco.projectUpdate(s.layer, full)) scatter(full, w, b, s);
    }
  }

  extraStateBytes(): number {
    let b = this.fresco.extraStateBytes();
    for (const a of this.scratch.values()) b += a.byteLength;
    return b;
  }
}

function gather(full: Float32Array, w: Float32Array, b: Float32Array | undefined, s: LinearLayerSpec): void {
  const d = b === undefined ? s.din : s.din + 1;
  for (let o = 0; o < s.dout; o++) {
    for (let i = 0; i < s.din; i++) full[o * d + i] = s.layout === 'out-in' ? w[o * s.din + i] : w[i * s.dout + o];
    if (b !== undefined) full[o * d + s.din] = b[o];
  }
}

function scatter(full: Float32Array, w: Float32Array, b: Float32Array | undefined, s: LinearLayerSpec): void {
  const d = b === undefined ? s.din : s.din + 1;
  for (let o = 0; o < s.dout; o++) {
    for (let i = 0; i < s.din; i++) {
      if (s.layout === 'out-in') w[o * s.din + i] = full[o * d + i];
      else w[i * s.dout + o] = full[o * d + i];
    }
    if (b !== undefined) b[o] = full[o * d + s.din];
  }
}
