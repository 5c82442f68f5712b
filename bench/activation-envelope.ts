// The activation envelope the bus benchmark sends and its tests decode: one float32 tensor
// from stage 0 to stage 1, iteration 0, forward.

import type { Envelope } from '../transport/envelope';

/** A forward activation of `job` carrying `tensor`, with `seq` as its sequence and microbatch number. */
export function float32Activation(job: string, tensor: Float32Array, seq = 0): Envelope {
  return {
    v: 1,
    job,
    kind: 'activation',
    iteration: 0,
    chunk: 0,
    dir: 'forward',
    src: 0,
    dst: 1,
    seq,
    mb: seq,
    sentAt: 0,
    bytes: 0,
    tensors: [{ dtype: 'float32', shape: [tensor.length], data: tensor }],
  };
}
