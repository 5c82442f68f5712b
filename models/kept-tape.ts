// Keeps the autodiff tape of a forward pass until its backward, so a stage's backward
// does not recompute its forward (the activations stay alive in between, as in
// PyTorch's pipelining without activation checkpointing). tf.grads records the tape
// and backpropagates in one call; this splits the two halves.
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
  if (typeof e.startTape !== 'function' || typeof e.endTape !== 'function' || typeof e.state?.gradientDepth !== 'number') {
    throw new KeptTapeError('this tfjs version has no engine tape (startTape/endTape/state.gradientDepth); backward must recompute the forward');
  }
  return e as EngineTape;
}

/** Runs `f` recording its tape, like the forward half of tf.grads. */
export function forwardKeepingTape(f: () => tf.Tensor): KeptForward {
  const engine = engineTape();
  if (engine.state.gradientDepth !== 0) throw new KeptTapeError('forwardKeepingTape cannot run inside another gradient computation');
  engine.startTape();
  let output: tf.Tensor;
  try {
    output = tf.tidy(f);
  } finally {
    engine.endTape();
  }
  const tape = engine.state.activeTape;
  engine.state.activeTape = null;
  if (!Array.isArray(tape)) throw new KeptTapeError('the engine recorded no tape (its internals changed); backward must recompute the forward');
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
  if (k.released) throw new KeptTapeError('this forward\'s tape was already used or released');
  if (dy.dtype !== 'float32') throw new KeptTapeError(`dy must be float32, got ${dy.dtype}`);
  if (dy.shape.length !== k.output.shape.length || dy.shape.some((d, i) => d !== k.output.shape[i])) {
    throw new KeptTapeError(`dy has shape [${dy.shape}], the forward's output [${k.output.shape}]`);
  }
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
          const dx = tf.tidy(g);
          const prev = grads.get(x.id);
          grads.set(x.id, prev ? tf.add(prev, dx) : dx);
          if (prev && prev !== dy) prev.dispose();
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

/** Frees what the tape kept for the backward, without running it. */
export function releaseTape(k: KeptForward): void {
  if (k.released) return;
  k.released = true;
  for (const node of k.tape) for (const t of node.saved ?? []) t.dispose();
  k.tape.length = 0;
}
