// Kept activations at other weights: the asynchronous mode's backward runs on the tape
// its forward kept (kept-tape.ts), so every operation's gradient uses the forward-time
// activations, as in FRESCO's runs (no activation recomputation), while the weights the
// gradients are taken at are those the consistency policy hands the backward (the
// current ones for Inconsistent and FRESCO, the forward's for Stash, a reconstruction
// for Recovery, ...). The tape's saved copies of the weights are what the weight
// half of each gradient reads (a matMul's dx = dy·Wᵀ; the engine saves a copy of each
// input its gradient names, in that order): right after the forward they are freed (so
// the tape holds no copy of the forward's weights, which would be a weight stash in all
// but name), and just before the backward the backward's weights are put in their place.
//
// Uses the engine tape's `saved` arrays, the same ones its gradient closures read
// (tfjs-core 4.22 engine.addTapeNode); tests pin the result to a hand-derived gradient
// (kept-weights.test.ts), so a tfjs change breaks there, not silently.
//
// Not exact for values computed from weights alone inside the forward (GPT's slice of
// the position embedding): those keep their forward-time values. The MLP LM has none;
// `weightOnlyOps` counts them.

import * as tf from '@tensorflow/tfjs';
import { KeptForward, KeptTapeError } from './kept-tape';

type TapeNode = KeptForward['tape'][number];

interface Slot {
  readonly node: TapeNode;
  readonly index: number;
  /** Index into the weights given to detachWeights. */
  readonly param: number;
  readonly shape: number[];
}

export interface DetachedWeights {
  readonly forward: KeptForward;
  readonly slots: readonly Slot[];
  /** Operations of the forward that read weights and no activation (see the header). */
  readonly weightOnlyOps: number;
  attached: boolean;
}

/**
 * Frees the tape's saved copies of `weights` (the tensors the forward ran with) and
 * remembers where they were. `input` is the stage's input tensor (token ids on a first
 * stage); null when the forward read none.
 */
export function detachWeights(
  kept: KeptForward,
  input: tf.Tensor | null,
  weights: readonly tf.Tensor[],
): DetachedWeights {
  if (kept.released) throw new KeptTapeError("detachWeights: this forward's tape was already used or released");
  const byId = new Map<number, number>(weights.map((w, i) => [w.id, i]));
  const fromInput = new Set<number>(input ? [input.id] : []);
  const fromWeight = new Set<number>(weights.map((w) => w.id));
  const slots: Slot[] = [];
  let weightOnlyOps = 0;
  // Saving a copy is itself recorded (an Identity whose output no operation reads): not counted.
  const read = new Set<number>(kept.tape.flatMap((n) => Object.values(n.inputs).map((t) => t.id)));
  for (const node of kept.tape) {
    const ins = Object.values(node.inputs);
    const onInput = ins.some((t) => fromInput.has(t.id));
    const onWeight = ins.some((t) => fromWeight.has(t.id));
    if (onInput) for (const o of node.outputs) fromInput.add(o.id);
    if (onWeight) for (const o of node.outputs) fromWeight.add(o.id);
    if (onWeight && !onInput && node.outputs.some((o) => read.has(o.id))) weightOnlyOps++;
    // The engine saved copies of these inputs, in this order (engine.getTensorsForGradient).
    const g = tf.getGradient(node.kernelName);
    if (!g || !node.saved) continue;
    const names = g.saveAllInputs ? Object.keys(node.inputs) : (g.inputsToSave ?? []);
    names.forEach((name, index) => {
      const x = node.inputs[name];
      const param = x === undefined ? undefined : byId.get(x.id);
      const t = node.saved![index];
      if (param === undefined || t === undefined) return;
      slots.push({ node, index, param, shape: [...t.shape] });
      t.dispose();
    });
  }
  return { forward: kept, slots, weightOnlyOps, attached: false };
}

/** Puts `weights` (same order and shapes as at detachWeights) where the forward's were. */
export function attachWeights(d: DetachedWeights, weights: readonly tf.Tensor[]): void {
  if (d.attached) throw new KeptTapeError('attachWeights: weights already attached to this tape');
  if (d.forward.released) throw new KeptTapeError("attachWeights: this forward's tape was already used or released");
  for (const s of d.slots) {
    const w = weights[s.param];
    if (w === undefined) throw new KeptTapeError(`attachWeights: no weight ${s.param}; got ${weights.length}`);
    if (w.size !== s.shape.reduce((a, b) => a * b, 1))
      throw new KeptTapeError(`attachWeights: weight ${s.param} has shape [${w.shape}], the forward's [${s.shape}]`);
    (s.node.saved as tf.Tensor[])[s.index] = tf.keep(w.reshape(s.shape));
  }
  d.attached = true;
}

/** Makes the tape releasable when its backward will not run (the freed slots are dropped). */
export function dropDetached(d: DetachedWeights): void {
  if (d.attached) return;
  const holes = new Map<TapeNode, Set<number>>();
  for (const s of d.slots) (holes.get(s.node) ?? holes.set(s.node, new Set()).get(s.node)!).add(s.index);
  for (const [node, idx] of holes) {
    const saved = node.saved as tf.Tensor[];
    const keep = saved.filter((_, i) => !idx.has(i));
    saved.length = 0;
    saved.push(...keep);
  }
  d.attached = true;
}
