// Moving tensors between tfjs and the wire, shared by the stage computes. Every read
// copies: dataSync can share memory with the backend's buffer (cpu backend), and a
// received message can be a view into the transport's reassembly buffer.

import * as tf from '@tensorflow/tfjs';
import { ParamInfo } from '../policies/optim/params';
import { StageModule } from './stage-module';
import { TensorPayload } from '../transport/envelope';

export function readFloat32(t: tf.Tensor): Float32Array {
  return Float32Array.from(t.dataSync() as Float32Array);
}

export function toPayload(t: tf.Tensor): TensorPayload {
  return { dtype: 'float32', shape: t.shape, data: readFloat32(t) };
}

export function fromPayload(p: TensorPayload): tf.Tensor {
  return tf.tensor(Float32Array.from(p.data as Float32Array), [...p.shape], 'float32');
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
