// A wasm Identity kernel, and a Cast to the dtype a tensor already has, that share
// their input's data (a reference count, as the wasm backend's own Reshape does)
// instead of copying it. tfjs's engine clones every tensor
// a gradient needs when the tape is on (saveTensorsForBackwardMode), and the wasm
// backend's Identity copies the whole tensor each time: about 850 copies of up to 2 MB
// per char-GPT microbatch (d 128, 8 blocks), a tenth of a training step; and every
// Multiply's gradient casts its other operand to float32, which it already is, by a
// copy (about 180 per microbatch). No wasm kernel
// writes into its inputs, so the shared data is never changed under a clone's feet;
// values are bitwise those of the copy.
//
// Not changed: string tensors (they keep the original kernel).

import * as tf from '@tensorflow/tfjs';

interface WasmRefCounting {
  incRef(dataId: tf.DataId): void;
}

const originals = new Map<string, tf.KernelConfig>();

function share(args: Parameters<tf.KernelFunc>[0]): tf.TensorInfo {
  const x = args.inputs['x'] as tf.TensorInfo;
  (args.backend as unknown as WasmRefCounting).incRef(x.dataId);
  return { dataId: x.dataId, shape: [...x.shape], dtype: x.dtype };
}

/** Replaces wasm's Identity and same-dtype Cast with sharing ones. Idempotent; throws when wasm is not registered. */
export function installSharedIdentity(): void {
  if (originals.size > 0) return;
  for (const name of ['Identity', 'Cast']) {
    const k = tf.getKernel(name, 'wasm');
    if (!k)
      throw new Error(
        `wasm-shared-identity: the wasm backend has no ${name} kernel (is @tensorflow/tfjs-backend-wasm loaded?)`,
      );
    originals.set(name, k);
  }
  const identity = originals.get('Identity')!;
  const cast = originals.get('Cast')!;
  const kernels: Record<string, tf.KernelFunc> = {
    Identity: (args) =>
      (args.inputs['x'] as tf.TensorInfo).dtype === 'string' ? identity.kernelFunc(args) : share(args),
    Cast: (args) => {
      const x = args.inputs['x'] as tf.TensorInfo;
      const to = (args.attrs as { dtype: tf.DataType }).dtype;
      return x.dtype === to && x.dtype !== 'string' ? share(args) : cast.kernelFunc(args);
    },
  };
  for (const [name, kernelFunc] of Object.entries(kernels)) {
    tf.unregisterKernel(name, 'wasm');
    tf.registerKernel({ kernelName: name, backendName: 'wasm', kernelFunc });
  }
}

/** Restores wasm's copying Identity and Cast. */
export function removeSharedIdentity(): void {
  for (const [name, k] of originals) {
    tf.unregisterKernel(name, 'wasm');
    tf.registerKernel(k);
  }
  originals.clear();
}
