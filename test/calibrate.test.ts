import { strict as assert } from 'assert';
import { loadBackend } from '../models/backend';
import { calibrate } from '../models/calibrate';
import { gptSpec } from '../models/gpt';
import { main } from '../cli/main';

describe('calibrate', function () {
  this.timeout(120_000);

  it('measures a matMul and a reference stage, each at least 3 runs, GFLOP/s being FLOPs over the median time', async () => {
    const report = await loadBackend();
    const c = calibrate({ matmulSize: 32, stageBlocks: 2, width: 16, seq: 8, batch: 2, budgetMs: 1 });
    assert.equal(c.backend, report.tfName);
    assert.equal(c.matmul.flops, 2 * 32 ** 3);
    // Stage 1 of a 4-block model cut 3 ways with tiny end weights: the two middle blocks, F + B = 3 forwards.
    const spec = gptSpec({ layers: 4, width: 16, heads: 4, seqLen: 8 });
    assert.equal(c.stage.blocks, 2);
    assert.equal(c.stage.flops, 3 * 2 * (spec.blocks[1].flopsPerSample + spec.blocks[2].flopsPerSample));
    for (const m of [c.matmul, c.stage]) {
      assert.ok(m.runs >= 3, `${m.runs} runs`);
      assert.ok(m.ms > 0 && Number.isFinite(m.ms));
      assert.ok(Math.abs(m.gflops - m.flops / (m.ms * 1e6)) < 1e-9 * m.gflops);
    }
  });

  it('baton calibrate --json prints the two measurements and the backend; a bad budget exits 2', async () => {
    let out = '';
    assert.equal(await main(['calibrate', '--json', '--budget-ms', '1'], (s) => (out += s)), 0);
    const c = JSON.parse(out);
    assert.ok(c.matmul.gflops > 0 && c.stage.gflops > 0);
    assert.equal(typeof c.backend, 'string');
    const write = process.stderr.write.bind(process.stderr);
    process.stderr.write = (() => true) as typeof process.stderr.write;
    try {
      assert.equal(await main(['calibrate', '--budget-ms', '0'], () => {}), 2);
    } finally {
      process.stderr.write = write;
    }
  });
});
