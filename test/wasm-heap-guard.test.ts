import * as assert from 'assert';
import * as tf from '@tensorflow/tfjs';
import { loadBackend } from '../models/backend';
import { checkWasmHeap, setWasmAllocationLimit, WasmHeapError } from '../models/wasm-heap-guard';
import { gptSpec } from '../models/gpt';
import { buildFullModel } from '../models/partition';

describe('wasm heap guard', () => {
  after(async () => {
    await loadBackend({ force: 'cpu' });
  });

  it('the heap guard throws WasmHeapError past the limit on wasm, and stages call it', async () => {
    await loadBackend({ force: 'wasm' });
    const big = tf.zeros([256, 1024]); // 1 MiB
    try {
      const live = checkWasmHeap();
      assert.ok(live >= 1024 * 1024);
      assert.throws(
        () => checkWasmHeap(512 * 1024, 'stage 3, F2'),
        (e: Error) => e instanceof WasmHeapError && /^stage 3, F2: \d+\.\d{3} GiB of live tensors/.test(e.message),
      );
      const model = buildFullModel(gptSpec({ vocabSize: 5, seqLen: 4, layers: 1, width: 8, heads: 2 }), {
        heapLimitBytes: 512 * 1024,
      });
      const input = tf.zeros([1, 4], 'int32');
      assert.throws(() => model.forward(input), /gpt\[embed, h0, head\] forward: .* GiB of live tensors/);
      input.dispose();
      model.dispose();
    } finally {
      big.dispose();
    }
    await loadBackend({ force: 'cpu' });
    const cpuBig = tf.zeros([256, 1024]);
    assert.doesNotThrow(() => checkWasmHeap(1024), 'the guard only applies to wasm');
    cpuBig.dispose();
  });

  it('refuses a tensor allocation that would pass the guard, inside a kernel, before anything is written', async () => {
    await loadBackend({ force: 'wasm' });
    const weights = tf.tensor([1, 2, 3, 4]);
    // Other tests' tensors may still be live: the guard counts from what is there now.
    setWasmAllocationLimit(tf.memory().numBytes + 2 * 1024 * 1024);
    try {
      const x = tf.ones([768, 512]); // 1.5 MiB: fits
      assert.throws(
        () => tf.matMul(x, x, false, true),
        (e: Error) =>
          e instanceof WasmHeapError &&
          /^allocating a tensor of \d+ bytes: .* past the \d+\.\d+ GiB guard/.test(e.message),
      );
      x.dispose();
      assert.throws(
        () => tf.zeros([1024, 1024]),
        (e: Error) => e instanceof WasmHeapError && /allocating a tensor of 4194304 bytes/.test(e.message),
      );
    } finally {
      setWasmAllocationLimit();
    }
    assert.deepEqual(Array.from(weights.dataSync()), [1, 2, 3, 4]);
    const after = tf.zeros([1024, 1024]);
    after.dispose();
    weights.dispose();
  });
});
