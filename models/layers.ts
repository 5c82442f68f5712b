// Functional building blocks shared by Baton's models: every function takes its weights
// as explicit tensors, so a stage can run with its current variables or with stashed or
// predicted weights, and gradients can be taken with respect to any of them.
//
// LayerNorm, GELU and the causal softmax run as one fused kernel each when the backend
// has them (models/fused-ops.ts, native kernels); otherwise the same math from tfjs ops.
//
// Not modelled: dropout (training here is deterministic).

import * as tf from '@tensorflow/tfjs';
import { fusedCausalSoftmax, fusedGelu, fusedLayerNorm } from './fused-ops';

/** What a linear layer saw in a captured forward: its input rows and its weight's names. */
export interface CapturedLinearInput {
  readonly weight: string;
  readonly bias?: string;
  readonly din: number;
  readonly dout: number;
  /** n × din input rows, row-major (a copy). */
  readonly x: Float32Array;
  readonly n: number;
}

let capture: { names: ReadonlyMap<number, string>; out: CapturedLinearInput[] } | null = null;

/**
 * Runs `fn` and records the input of every linear layer whose weight tensor is named in
 * `names` (tensor id → parameter name). Asynchronous consistency (FRESCO) protects the
 * subspace of these inputs; the model itself stays unaware of it.
 */
export function captureLinearInputs<T>(
  names: ReadonlyMap<number, string>,
  fn: () => T,
): { result: T; inputs: CapturedLinearInput[] } {
  const prev = capture;
  capture = { names, out: [] };
  try {
    const result = fn();
    return { result, inputs: capture.out };
  } finally {
    capture = prev;
  }
}

/** x (..., Cin) @ w (Cin, Cout) + b (Cout) → (..., Cout). */
export function linear(x: tf.Tensor, w: tf.Tensor, b?: tf.Tensor): tf.Tensor {
  const cin = x.shape[x.shape.length - 1]!;
  const cout = w.shape[1]!;
  const lead = x.shape.slice(0, -1);
  const weight = capture?.names.get(w.id);
  if (capture && weight !== undefined) {
    const rows = Float32Array.from(x.dataSync() as Float32Array);
    capture.out.push({
      weight,
      bias: b ? capture.names.get(b.id) : undefined,
      din: cin,
      dout: cout,
      x: rows,
      n: rows.length / cin,
    });
  }
  let y: tf.Tensor = tf.matMul(x.reshape([-1, cin]) as tf.Tensor2D, w as tf.Tensor2D); // (N, Cout)
  if (b) y = y.add(b);
  return y.reshape([...lead, cout]);
}

export const LAYER_NORM_EPS = 1e-5;

/** Layer normalisation over the last axis with gain g and bias b. */
export function layerNorm(x: tf.Tensor, g: tf.Tensor, b: tf.Tensor): tf.Tensor {
  const fused = fusedLayerNorm(x, g, b, LAYER_NORM_EPS);
  if (fused) return fused;
  const { mean, variance } = tf.moments(x, -1, true);
  return x
    .sub(mean)
    .mul(tf.rsqrt(variance.add(LAYER_NORM_EPS)))
    .mul(g)
    .add(b);
}

const GELU_C = Math.sqrt(2 / Math.PI);

/**
 * GELU, tanh approximation (as in GPT-2): 0.5·x·(1 + tanh(z)) with
 * z = √(2/π)(x + 0.044715x³), computed as x·σ(2z), the same function, because wasm's
 * sigmoid is about 15x faster than its tanh.
 */
export function gelu(x: tf.Tensor): tf.Tensor {
  const fused = fusedGelu(x);
  if (fused) return fused;
  const z2 = x.add(x.mul(x).mul(x).mul(0.044715)).mul(2 * GELU_C);
  return x.mul(tf.sigmoid(z2));
}

/** Additive causal mask (T, T): 0 on and below the diagonal, -1e9 above. */
function causalMask(t: number): tf.Tensor2D {
  const m = new Float32Array(t * t);
  for (let i = 0; i < t; i++) for (let j = i + 1; j < t; j++) m[i * t + j] = -1e9;
  return tf.tensor2d(m, [t, t]);
}

export interface AttentionWeights {
  /** (C, C) each, and (C) biases. */
  readonly wq: tf.Tensor;
  readonly bq: tf.Tensor;
  readonly wk: tf.Tensor;
  readonly bk: tf.Tensor;
  readonly wv: tf.Tensor;
  readonly bv: tf.Tensor;
  readonly wo: tf.Tensor;
  readonly bo: tf.Tensor;
}

/**
 * Causal multi-head self-attention of x (B, T, C). Separate q, k, v projections rather
 * than one fused (C, 3C) matrix: slicing the fused output is slow on wasm.
 */
export function causalSelfAttention(x: tf.Tensor, heads: number, w: AttentionWeights): tf.Tensor {
  const C = x.shape[2]!;
  return linear(attentionHeads(x, heads, C / heads, w), w.wo, w.bo);
}

/**
 * The heads' mixed values before the output projection, (B, T, heads·headDim): q, k, v of
 * `heads` heads of width `headDim` (wq, wk, wv are (C, heads·headDim)). A tensor-parallel
 * rank runs it on its own heads' columns.
 */
export function attentionHeads(
  x: tf.Tensor,
  heads: number,
  headDim: number,
  w: Omit<AttentionWeights, 'wo' | 'bo'>,
): tf.Tensor {
  const [B, T] = x.shape as [number, number, number];
  const hd = headDim;
  const split = (t: tf.Tensor) => t.reshape([B, T, heads, hd]).transpose([0, 2, 1, 3]); // (B, H, T, hd)
  const q = split(linear(x, w.wq, w.bq));
  const k = split(linear(x, w.wk, w.bk));
  const v = split(linear(x, w.wv, w.bv));
  const att = causalSoftmax(tf.matMul(q, k, false, true), 1 / Math.sqrt(hd)); // (B, H, T, T)
  return tf
    .matMul(att, v)
    .transpose([0, 2, 1, 3])
    .reshape([B, T, heads * hd]); // (B, T, H·hd)
}

/** softmax(scale·scores + causal mask) over the last axis of scores (..., T, T). */
export function causalSoftmax(scores: tf.Tensor, scale: number): tf.Tensor {
  const fused = fusedCausalSoftmax(scores, scale);
  if (fused) return fused;
  const t = scores.shape[scores.rank - 1]!;
  return tf.softmax(scores.mul(scale).add(causalMask(t)), -1);
}

/** Mean cross-entropy of logits (..., V) against int32 targets (...). */
export function crossEntropy(logits: tf.Tensor, targets: tf.Tensor): tf.Scalar {
  const vocab = logits.shape[logits.shape.length - 1]!;
  const flat = logits.reshape([-1, vocab]); // (N, V)
  const n = flat.shape[0]!;
  if (targets.size !== n) {
    throw new RangeError(`crossEntropy: ${targets.size} targets for ${n} rows of logits (shape [${logits.shape}])`);
  }
  const logp = tf.logSoftmax(flat, -1);
  // oneHot instead of gather: gather with batchDims is broken on wasm.
  const picked = tf
    .oneHot(targets.reshape([-1]).toInt(), vocab)
    .toFloat()
    .mul(logp); // (N, V)
  return picked.sum().div(-n) as tf.Scalar;
}
