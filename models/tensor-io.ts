// Moving tensors between tfjs and the wire, shared by the stage computes. Every read
// copies: dataSync can share memory with the backend's buffer (cpu backend), and a
// received message can be a view into the transport's reassembly buffer.

import * as tf from '@tensorflow/tfjs';
import { ParamInfo } from '../policies/optim/params';
import { StageModule } from './stage-module';
import { TensorPayload } from '../transport/envelope';
import { memoryOf } from './native-kernel-funcs';

// The typed-array constructor, not Float32Array.from: the same values, but a copy in
// one pass instead of element by element through the iterator (~20x slower).
export function readFloat32(t: tf.Tensor): Float32Array {
  return new Float32Array(t.dataSync() as Float32Array);
}

/**
 * The float32 values of `t` without a copy where the backend's memory is in reach (a view
 * of the wasm heap, or the cpu backend's array), else a copy: to read at once, before the
 * next tfjs call (allocating can move the wasm heap), and never to write.
 */
export function viewFloat32(t: tf.Tensor): Float32Array {
  const b = tf.getBackend();
  const v = t.dtype === 'float32' && (b === 'wasm' || b === 'cpu') ? memoryOf(b, tf.backend()).view(t) : null;
  return v ?? readFloat32(t);
}

export function toPayload(t: tf.Tensor): TensorPayload {
  return { dtype: 'float32', shape: t.shape, data: readFloat32(t) };
}

export function fromPayload(p: TensorPayload): tf.Tensor {
  return tf.tensor(new Float32Array(p.data as Float32Array), [...p.shape], 'float32');
}

/** Optimizer descriptions of a module's parameters: matrices decay, vectors (biases, norms) do not. */
export function paramInfos(module: Pick<StageModule, 'params' | 'paramNames'>): ParamInfo[] {
  const names = module.paramNames();
  return module.params().map((v, i) => ({ name: names[i], shape: v.shape, decay: v.shape.length >= 2 }));
}

/**
 * Sets a variable to `values`. assign() takes its own reference to the new tensor's data,
 * so the tensor made here is disposed at once: without that every assign kept the
 * variable's previous values alive, a whole model's worth per optimizer step.
 */
export function assignValues(v: tf.Variable, values: Float32Array): void {
  const t = tf.tensor(values, v.shape, 'float32');
  try {
    v.assign(t);
  } finally {
    t.dispose();
  }
}
