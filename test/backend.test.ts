import * as assert from 'assert';
import * as tf from '@tensorflow/tfjs';
import { BACKEND_CHOICES, BackendError, describeBackend, loadBackend } from '../models/backend';

describe('backend: choosing a TensorFlow.js backend', () => {
  const savedEnv = process.env['BATON_BACKEND'];
  afterEach(() => {
    if (savedEnv === undefined) delete process.env['BATON_BACKEND'];
    else process.env['BATON_BACKEND'] = savedEnv;
  });
  after(async () => {
    await loadBackend({ force: 'cpu' });
  });

  it('without a choice, uses the first backend that works and says why earlier ones failed', async () => {
    delete process.env['BATON_BACKEND'];
    const report = await loadBackend();
    const firstOk = report.tried.findIndex((t) => t.ok);
    assert.strictEqual(firstOk, report.tried.length - 1, 'stops at the first success');
    assert.strictEqual(report.tried[firstOk]!.name, report.backend);
    assert.deepStrictEqual(
      report.tried.map((t) => t.name),
      BACKEND_CHOICES.slice(0, report.tried.length),
    );
    for (const t of report.tried.slice(0, -1)) assert.ok(t.reason.length > 0, `${t.name} failed without a reason`);
    assert.strictEqual(tf.getBackend(), report.tfName);
    // A smoke computation on the chosen backend.
    assert.deepStrictEqual(
      Array.from(tf.tidy(() => tf.matMul(tf.tensor2d([[1, 2]]), tf.tensor2d([[3], [4]])).dataSync())),
      [11],
    );
    if (report.backend === 'wasm') {
      assert.match(
        describeBackend(report),
        /^backend wasm \(tfjs-node-gpu: .*; tfjs-node: .*\); kernels: (native sgemm \(.*\): BatchMatMul, _FusedMatMul, Sum(, \w+)*|tfjs \(native: .+\))$/,
      );
    }
  });

  it('a forced choice loads exactly that backend', async () => {
    const report = await loadBackend({ force: 'cpu' });
    assert.strictEqual(report.backend, 'cpu');
    assert.deepStrictEqual(
      report.tried.map((t) => [t.name, t.ok]),
      [['cpu', true]],
    );
    assert.strictEqual(tf.getBackend(), 'cpu');
  });

  it('is idempotent: the same request returns the same report', async () => {
    const a = await loadBackend({ force: 'wasm' });
    const b = await loadBackend({ force: 'wasm' });
    assert.strictEqual(a, b);
    assert.strictEqual(tf.getBackend(), 'wasm');
  });

  it('reads BATON_BACKEND when no force is given', async () => {
    process.env['BATON_BACKEND'] = 'cpu';
    const report = await loadBackend();
    assert.strictEqual(report.backend, 'cpu');
  });

  it('rejects an unknown backend, listing the choices', async () => {
    await assert.rejects(
      loadBackend({ force: 'webgpu' }),
      (e: Error) =>
        e instanceof BackendError &&
        e.message === '--backend: unknown backend "webgpu"; choices are tfjs-node-gpu, tfjs-node, wasm, cpu',
    );
    process.env['BATON_BACKEND'] = 'gpu';
    await assert.rejects(loadBackend(), /BATON_BACKEND: unknown backend "gpu"/);
  });

  it('a forced backend that cannot load fails with the reason', async () => {
    let installed = true;
    try {
      require.resolve('@tensorflow/tfjs-node');
    } catch {
      installed = false;
    }
    if (installed) return; // nothing to show on a machine that has it
    await assert.rejects(
      loadBackend({ force: 'tfjs-node' }),
      (e: Error) => e instanceof BackendError && /tfjs-node: @tensorflow\/tfjs-node is not installed/.test(e.message),
    );
  });
});
