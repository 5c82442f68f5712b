// FRESCO as a ConsistencyPolicy: each update of a protected linear layer is projected
// onto the complement of the in-flight inputs' subspace (fresco.ts). Parameters not
// listed in `layers` (embeddings, norms, anything else) are updated as proposed.
//
// Forwards run on the current weights. With kept activations (the store's default: the
// backward runs on the forward's tape, as in the paper's runs) a backward gets the
// current weights, projected linear ones and all (holdUnprotected: false): the layers'
// inputs are the forward's by construction. When the backward instead recomputes its
// forward (holdUnprotected: true, the store's 'recompute' backward), it gets the current,
// projected linear weights and,
// for every other parameter, the value its forward saw: those parameters are never
// projected, and a norm's gain changed between F and B would change the input of every
// linear layer after it, which is exactly what FRESCO protects. With them held, every
// protected layer sees at the backward the input it saw at the forward (exactly when the
// projection is: see fresco.ts), as with the stored activations of the paper's runs; the
// linear layers' Jacobians are at the updated weights, the norms' and embeddings' (and
// their own gradients) at the values the forward saw, as with weight stashing. The held values are copied on update, only
// while an in-flight microbatch needs them, like weight stashing but of the unprotected
// parameters only.
//
// Weight layouts, so the store can keep the model's own tensors:
//   'augmented'  weight is dout×(din+1), bias in the last column, no bias param;
//   'out-in'     weight is dout×din (PyTorch Linear), optional bias [dout];
//   'in-out'     weight is din×dout (tfjs Dense kernel), optional bias [dout].
// All three are projected in place on the update tensors themselves; no dout×(din+1)
// copy is made.
//
// extraStateBytes() is Fresco.extraStateBytes() (the bases of the microbatches in
// flight, d·min(k1, n, d)·4 bytes per layer and mb, k1 = ⌈k/τ⌉, plus one shared
// projection scratch of min(PROJECTION_BLOCK_ROWS, dout)·k Float64s, the largest any
// layer has needed) plus the held unprotected parameters. The protected basis Q and
// other per-call temporaries are freed when the call returns and are not counted
// (fresco.ts lists them).

import { ParamMap, lookup } from '../optim/params';
import { Fresco, WeightLayout } from './fresco';
import { CopyOnUpdate } from './copy-on-update';
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
  /** τ: microbatches in flight at this stage when an update is applied (sets k1 = ⌈k/τ⌉). */
  readonly tau: number;
  /** α, default 0.25. */
  readonly alpha?: number;
  /**
   * Hand a backward the unprotected parameters' forward-time values (needed when the
   * backward recomputes its forward; see the header). Default true.
   */
  readonly holdUnprotected?: boolean;
}

export class FrescoPolicy implements ConsistencyPolicy {
  readonly name = 'fresco' as const;
  readonly fresco: Fresco;
  private readonly specs: readonly LinearLayerSpec[];
  /** The unprotected parameters' values each in-flight microbatch's forward saw. */
  private readonly held: CopyOnUpdate;

  constructor(opts: FrescoPolicyOptions) {
    this.fresco = new Fresco({ tau: opts.tau, alpha: opts.alpha });
    this.specs = opts.layers;
    for (const s of opts.layers) {
      if (s.layout === 'augmented' && s.bias !== undefined) {
        throw new ConsistencyError(
          `fresco layer "${s.layer}": layout 'augmented' carries its bias in the weight; got bias param "${s.bias}"`,
        );
      }
      this.fresco.addLayer(s.layer, s.dout, s.din, s.layout === 'augmented' || s.bias !== undefined);
    }
    const projected = new Set(opts.layers.flatMap((s) => (s.bias === undefined ? [s.weight] : [s.weight, s.bias])));
    const hold = opts.holdUnprotected !== false;
    this.held = new CopyOnUpdate('fresco', (name) => hold && !projected.has(name));
  }

  weightsForForward(_mb: number, ctx: WeightsContext): ParamMap {
    return ctx.params;
  }

  forward(mb: number, layerInputs: ReadonlyMap<string, LayerInput>): void {
    for (const s of this.specs) {
      if (!layerInputs.has(s.layer)) {
        throw new ConsistencyError(
          `fresco, forward of mb ${mb}: no input for layer "${s.layer}"; got [${[...layerInputs.keys()].join(', ')}]`,
        );
      }
    }
    this.held.enter(mb);
    for (const s of this.specs) {
      const input = layerInputs.get(s.layer) as LayerInput;
      this.fresco.onForward(s.layer, mb, input.x, input.n);
    }
  }

  weightsForBackward(mb: number, ctx: WeightsContext): ParamMap {
    const held = this.held.seenBy(mb);
    if (held === undefined) return ctx.params;
    const w = new Map(ctx.params);
    for (const [name, p] of held) w.set(name, p);
    return w;
  }

  backward(mb: number): void {
    this.held.leave(mb);
    for (const s of this.specs) this.fresco.onBackward(s.layer, mb);
  }

  transformUpdate(updates: Map<string, Float32Array>, ctx: UpdateContext): void {
    this.held.beforeUpdate(ctx.params);
    for (const s of this.specs) {
      const where = `fresco update of layer "${s.layer}"`;
      const cols = s.layout === 'augmented' ? s.din + 1 : s.din;
      const w = lookup(updates, s.weight, s.dout * cols, where);
      const b = s.bias === undefined ? undefined : lookup(updates, s.bias, s.dout, where);
      this.fresco.projectLayerUpdate(s.layer, s.layout, w, b);
    }
  }

  /** Update counts whose unprotected parameters are held. */
  get versionsHeld(): number {
    return this.held.versionsHeld;
  }

  extraStateBytes(): number {
    return this.fresco.extraStateBytes() + this.held.bytes();
  }
}
