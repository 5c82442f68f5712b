// A stage's parameter as a tfjs variable made from its initial values (both the plain
// and the tensor-parallel stage modules build theirs this way).

import * as tf from '@tensorflow/tfjs';

/** A trainable float32 variable holding `values`. The variable takes its own reference to
 * the data, so the initial tensor is disposed at once. */
export function trainableVariable(values: Float32Array, shape: readonly number[]): tf.Variable {
  const initial = tf.tensor(values, [...shape], 'float32');
  try {
    return tf.variable(initial, true);
  } finally {
    initial.dispose();
  }
}
