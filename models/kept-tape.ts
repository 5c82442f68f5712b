// Keeps the autodiff tape of a forward pass until its backward, so a stage's backward
// does not recompute its forward (the activations stay alive in between, as in
// PyTorch's pipelining without activation checkpointing). tf.grads records the tape
// and backpropagates in one call; this splits the two halves.
//
// A split backward (zero-bubble B and W) uses the same tape: backwardInputFromTape runs
// only the gradients along the activation path and defers every weight gradient;
// weightGradsFromDeferred runs those later. Both halves call the same gradient
// functions on the same output gradients, in the same order, as the whole backward, so
// input and weight gradients are bitwise equal to it.
//
// It uses tfjs-core's engine tape (startTape/endTape, state.activeTape and the nodes'
// gradient closures), which is not part of tfjs's typed API: tests pin the result to
// tf.grads on the same function (models.test.ts), so a tfjs upgrade that changes the
// internals fails there, not silently.

import * as tf from '@tensorflow/tfjs';

interface TapeNode {
  readonly id: number;
  readonly kernelName: string;
  inputs: Record<string, tf.Tensor>;
  readonly outputs: tf.Tensor[];
  readonly gradient?: (dys: (tf.Tensor | null)[]) => Record<string, () => tf.Tensor>;
  readonly saved?: tf.Tensor[];
}

interface EngineTape {
  state: { gradientDepth: number; activeTape: TapeNode[] | null };
  startTape(): void;
  endTape(): void;
}

export class KeptTapeError extends Error {
  override name = 'KeptTapeError';
}

/** A forward pass whose tape is kept for one backward (or released unused). */
export interface KeptForward {
  /** The forward's output; the caller owns it and may dispose it (backward needs only its id and shape). */
  readonly output: tf.Tensor;
  /** Internal: the recorded nodes, with the tensors their gradients need. */
  readonly tape: TapeNode[];
  released: boolean;
}

function engineTape(): EngineTape {
  const e = tf.engine() as unknown as Partial<EngineTape>;
  if (
    typeof e.startTape !== 'function' ||
    typeof e.endTape !== 'function' ||
    typeof e.state?.gradientDepth !== 'number'
  ) {
    throw new KeptTapeError(
      'this tfjs version has no engine tape (startTape/endTape/state.gradientDepth); backward must recompute the forward',
    );
  }
  return e as EngineTape;
}

/** Runs `f` recording its tape, like the forward half of tf.grads. */
export function forwardKeepingTape(f: () => tf.Tensor): KeptForward {
  const engine = engineTape();
  if (engine.state.gradientDepth !== 0)
    throw new KeptTapeError('forwardKeepingTape cannot run inside another gradient computation');
  engine.startTape();
  let output: tf.Tensor;
  try {
    output = tf.tidy(f);
  } finally {
    engine.endTape();
  }
  const tape = engine.state.activeTape;
  engine.state.activeTape = null;
  if (!Array.isArray(tape))
    throw new KeptTapeError('the engine recorded no tape (its internals changed); backward must recompute the forward');
  return { output, tape, released: false };
}

/** Nodes on a path from one of `xs` to `y`, with inputs pruned to those that depend on `xs` (as tf.grads does). */
function nodesFromXsToY(tape: readonly TapeNode[], xs: readonly tf.Tensor[], y: tf.Tensor): TapeNode[] {
  const fromX = new Set(xs.map((x) => x.id));
  const nodesFromX = new Set<number>();
  for (const node of tape) {
    if (Object.values(node.inputs).some((t) => fromX.has(t.id))) {
      for (const o of node.outputs) fromX.add(o.id);
      nodesFromX.add(node.id);
    }
  }
  const leadToY = new Set([y.id]);
  const nodesToY = new Set<number>();
  for (let i = tape.length - 1; i >= 0; i--) {
    const node = tape[i];
    if (node.outputs.some((o) => leadToY.has(o.id))) {
      for (const t of Object.values(node.inputs)) leadToY.add(t.id);
      nodesToY.add(node.id);
    }
  }
  return tape
    .filter((n) => nodesFromX.has(n.id) && nodesToY.has(n.id))
    .map((n) => ({ ...n, inputs: Object.fromEntries(Object.entries(n.inputs).filter(([, t]) => fromX.has(t.id))) }));
}

/**
 * Gradients of `sum(dy · output)` with respect to `xs` (tensors the forward used), from
 * the kept tape; then frees the tape. The caller owns the returned gradients.
 */
export function backwardFromTape(k: KeptForward, xs: readonly tf.Tensor[], dy: tf.Tensor): tf.Tensor[] {
  checkDy(k, dy);
  try {
    const nodes = nodesFromXsToY(k.tape, xs, k.output);
    if (nodes.length === 0) throw new KeptTapeError('no recorded operation leads from the given tensors to the output');
    return tf.tidy(() => {
      const grads = new Map<number, tf.Tensor>([[k.output.id, dy]]);
      for (let i = nodes.length - 1; i >= 0; i--) {
        const node = nodes[i];
        if (!node.gradient) throw new KeptTapeError(`no gradient is registered for ${node.kernelName}`);
        const inputGrads = node.gradient(node.outputs.map((o) => grads.get(o.id) ?? null));
        for (const [name, x] of Object.entries(node.inputs)) {
          const g = inputGrads[name];
          if (!g) throw new KeptTapeError(`${node.kernelName} gives no gradient for its input ${name}`);
          accumulate(grads, x.id, tf.tidy(g), dy);
        }
      }
      return xs.map((x) => {
        const g = grads.get(x.id);
        return g ? (g === dy ? g.clone() : g) : tf.zerosLike(x);
      });
    });
  } finally {
    releaseTape(k);
  }
}

/** One step of the weight half of a split backward, in the whole backward's order. */
type DeferredStep =
  /** A node on the activation path: its gradients for the weight-side inputs, from its output gradients (kept). */
  | { readonly node: TapeNode; readonly dys: (tf.Tensor | null)[] }
  /** A node that only weights feed (a cast or transpose of a weight): backpropagated in the weight half. */
  | { readonly node: TapeNode; readonly dys: null };

/** What the input half of a split backward leaves for the weight half. */
export interface DeferredWeightGrads {
  readonly forward: KeptForward;
  /** The output gradient (weight-only paths, e.g. all of a first stage, start from it in W). */
  readonly dy: tf.Tensor;
  readonly weights: readonly tf.Tensor[];
  /** Tensors on the activation path (their gradients came in the input half). */
  readonly activationIds: ReadonlySet<number>;
  readonly steps: DeferredStep[];
  /** Output gradients kept for the steps (not the caller's dy). */
  readonly owned: tf.Tensor[];
  released: boolean;
}

function checkDy(k: KeptForward, dy: tf.Tensor): void {
  if (k.released) throw new KeptTapeError("this forward's tape was already used or released");
  if (dy.dtype !== 'float32') throw new KeptTapeError(`dy must be float32, got ${dy.dtype}`);
  if (dy.shape.length !== k.output.shape.length || dy.shape.some((d, i) => d !== k.output.shape[i])) {
    throw new KeptTapeError(`dy has shape [${dy.shape}], the forward's output [${k.output.shape}]`);
  }
}

function accumulate(grads: Map<number, tf.Tensor>, id: number, dx: tf.Tensor, keep: tf.Tensor | null): void {
  const prev = grads.get(id);
  grads.set(id, prev ? tf.add(prev, dx) : dx);
  if (prev && prev !== keep) prev.dispose();
}

/**
 * The input half of a split backward: the gradient of `sum(dy · output)` with respect to
 * `input` (null on a first stage, whose input is token ids), computing nothing for the
 * weights. The weight half is deferred: weightGradsFromDeferred, or releaseDeferred.
 * The tape stays alive until then; so must `dy` and `input`, which the caller owns.
 */
export function backwardInputFromTape(
  k: KeptForward,
  input: tf.Tensor | null,
  weights: readonly tf.Tensor[],
  dy: tf.Tensor,
): { gradInput: tf.Tensor | null; deferred: DeferredWeightGrads } {
  checkDy(k, dy);
  const owned: tf.Tensor[] = [];
  let done = false;
  try {
    const nodes = nodesFromXsToY(k.tape, input ? [input, ...weights] : weights, k.output);
    if (nodes.length === 0) throw new KeptTapeError('no recorded operation leads from the given tensors to the output');
    const onPath = new Set<number>(input ? [input.id] : []);
    const activationNode = nodes.map((n) => {
      const on = Object.values(n.inputs).some((t) => onPath.has(t.id));
      if (on) for (const o of n.outputs) onPath.add(o.id);
      return on;
    });
    const steps: DeferredStep[] = [];
    const gradInput = tf.tidy(() => {
      const grads = new Map<number, tf.Tensor>([[k.output.id, dy]]);
      for (let i = nodes.length - 1; i >= 0; i--) {
        const node = nodes[i];
        if (!node.gradient) throw new KeptTapeError(`no gradient is registered for ${node.kernelName}`);
        if (!activationNode[i]) {
          steps.push({ node, dys: null });
          continue;
        }
        const dys = node.outputs.map((o) => grads.get(o.id) ?? null);
        const inputGrads = node.gradient(dys);
        let weightSide = false;
        for (const [name, x] of Object.entries(node.inputs)) {
          if (!inputGrads[name]) throw new KeptTapeError(`${node.kernelName} gives no gradient for its input ${name}`);
          if (!onPath.has(x.id)) {
            weightSide = true;
            continue;
          }
          accumulate(grads, x.id, tf.tidy(inputGrads[name]), dy);
        }
        if (weightSide) {
          for (const g of dys) if (g && g !== dy && !owned.includes(g)) owned.push(tf.keep(g));
          steps.push({ node, dys });
        }
      }
      if (!input) return [];
      const g = grads.get(input.id);
      return [g ? (g === dy ? g.clone() : g) : tf.zerosLike(input)];
    });
    done = true;
    return {
      gradInput: gradInput[0] ?? null,
      deferred: { forward: k, dy, weights, activationIds: onPath, steps, owned, released: false },
    };
  } finally {
    if (!done) {
      for (const t of owned) t.dispose();
      releaseTape(k);
    }
  }
}

/**
 * The weight half of a split backward: one gradient per weight given to
 * backwardInputFromTape, same order; then frees the tape. The caller owns the result.
 */
export function weightGradsFromDeferred(d: DeferredWeightGrads): tf.Tensor[] {
  if (d.released) throw new KeptTapeError('these deferred weight gradients were already computed or released');
  try {
    return tf.tidy(() => {
      const grads = new Map<number, tf.Tensor>([[d.forward.output.id, d.dy]]);
      for (const step of d.steps) {
        const { node } = step;
        const dys = step.dys ?? node.outputs.map((o) => grads.get(o.id) ?? null);
        const inputGrads = node.gradient!(dys);
        for (const [name, x] of Object.entries(node.inputs)) {
          // Activation-path inputs had their gradients in the input half.
          if (step.dys && d.activationIds.has(x.id)) continue;
          accumulate(grads, x.id, tf.tidy(inputGrads[name]!), d.dy);
        }
      }
      return d.weights.map((w) => {
        const g = grads.get(w.id);
        return g ? (g === d.dy ? g.clone() : g) : tf.zerosLike(w);
      });
    });
  } finally {
    releaseDeferred(d);
  }
}

/** Frees what a split backward kept for its weight half, without running it. */
export function releaseDeferred(d: DeferredWeightGrads): void {
  if (d.released) return;
  d.released = true;
  for (const t of d.owned) t.dispose();
  d.owned.length = 0;
  d.steps.length = 0;
  releaseTape(d.forward);
}

/** Frees what the tape kept for the backward, without running it. */
export function releaseTape(k: KeptForward): void {
  if (k.released) return;
  k.released = true;
  for (const node of k.tape) for (const t of node.saved ?? []) t.dispose();
  k.tape.length = 0;
}
