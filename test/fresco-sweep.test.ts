import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { RunResult, SWEEP_PRESETS, SweepPreset, cachedRun, ema, runKey } from '../bench/fresco-sweep';
import { analyse, censoredMedian, formatReport, updatesToReach } from '../bench/sweep-report';
import { excessRows, formatExcess } from '../bench/sweep-excess';

const preset: SweepPreset = { ...SWEEP_PRESETS.quick!, depths: [1, 2], lrs: [1e-2, 3e-3], seeds: [0, 1] };

/** A run whose loss falls linearly from 4 to `end` over 100 updates. */
function run(stages: number, method: string, lr: number, seed: number, end: number, extra = {}): RunResult {
  const losses = Array.from({ length: 100 }, (_, i) => 4 - ((4 - end) * i) / 99);
  return {
    stages,
    method,
    lr,
    seed,
    alpha: 0.25,
    losses,
    updates: 100,
    extraStateBytes: 0,
    stalenessMax: [],
    seconds: 1,
    ...extra,
  } as RunResult;
}

describe('the FRESCO sweep report', () => {
  it('finds the first update at or below a target, and a median that treats "not reached" as largest', () => {
    assert.equal(updatesToReach([3, 2, 1], 2), 2);
    assert.equal(updatesToReach([3, 2, 1], 0.5), null);
    assert.equal(censoredMedian([2, null, 1]), 2);
    assert.equal(censoredMedian([1, null, null]), null);
    assert.equal(censoredMedian([1, 3]), 2);
  });

  it('picks the LR by final loss on the first seed, and measures slowdown against P = 1 per seed', () => {
    const runs = [
      run(1, 'inconsistent', 1e-2, 0, 2),
      run(1, 'inconsistent', 1e-2, 1, 2),
      run(1, 'inconsistent', 3e-3, 0, 2.5),
      // At P = 2, fresco reaches P = 1's loss at 70% later, stash never: slower to the target.
      run(2, 'fresco', 1e-2, 0, 1.5),
      run(2, 'fresco', 1e-2, 1, 1.5),
      run(2, 'stash', 1e-2, 0, 3.5),
      run(2, 'stash', 1e-2, 1, 3.5),
      run(2, 'stash', 3e-3, 0, 3),
    ];
    const a = analyse(preset, runs);
    assert.equal(a.reference.lr, 1e-2);
    const fresco = a.rows.find((r) => r.method === 'fresco')!;
    const target = ema(runs[0]!.losses)[69]!;
    const need = (xs: number[]) => updatesToReach(ema(xs), target)!;
    assert.equal(fresco.median, need(runs[3]!.losses) / need(runs[0]!.losses));
    assert.ok(fresco.median! < 1);
    // Seed 0 picks 3e-3 for stash, whose other seed has not run at it: the cell stays at 1e-2 and says so.
    const stash = a.rows.find((r) => r.method === 'stash')!;
    assert.equal(stash.lr, 1e-2);
    assert.equal(stash.bestOnSeed0, 3e-3);
    assert.equal(stash.median, null);
    assert.match(formatReport(preset, a), /stash +not reached/);
  });

  it('lists each α sweep under its own depth', () => {
    const runs = [
      run(1, 'inconsistent', 1e-2, 0, 2),
      run(2, 'fresco', 1e-2, 0, 2),
      run(2, 'fresco', 1e-2, 0, 2.1, { alpha: 0.5 }),
      run(4, 'fresco', 1e-2, 0, 2.2),
      run(4, 'fresco', 1e-2, 0, 2.3, { alpha: 1 }),
    ];
    const a = analyse({ ...preset, depths: [1, 2, 4] }, runs);
    assert.deepEqual(
      a.alphas.map((r) => [r.stages, r.alpha]).sort(),
      [
        [2, 0.25],
        [2, 0.5],
        [4, 0.25],
        [4, 1],
      ].sort(),
    );
  });

  it("pairs each method's final loss with P = 1's by seed, and FRESCO's with its own projection control", () => {
    const runs = [
      run(1, 'inconsistent', 1e-2, 0, 2),
      run(1, 'inconsistent', 1e-2, 1, 2.2),
      run(2, 'stash', 1e-2, 0, 2.5),
      run(2, 'stash', 1e-2, 1, 2.4),
      run(2, 'fresco', 1e-2, 0, 1.9),
      run(2, 'fresco', 1e-2, 1, 2.0),
      run(1, 'projection-control', 1e-2, 0, 1.7, { controlStages: 2 }),
      run(1, 'projection-control', 1e-2, 1, 1.9, { controlStages: 2 }),
      run(1, 'projection-control', 1e-2, 0, 1.0, { controlStages: 4 }),
    ];
    const rows = excessRows(preset, runs);
    const diffs = (label: string) =>
      rows.find((r) => r.label === label && r.stages === 2)!.diffs.map((d) => +d.toFixed(9));
    // finalLoss is the EMA of the last update, the same affine map of `end` for every run.
    const scale = (end: number) =>
      +(ema(run(1, 'x', 0, 0, end).losses).at(-1)! - ema(run(1, 'x', 0, 0, 0).losses).at(-1)!).toFixed(9);
    const k = scale(1);
    assert.deepEqual(diffs('stash − P=1'), [+(0.5 * k).toFixed(9), +(0.2 * k).toFixed(9)]);
    assert.deepEqual(diffs('fresco − its P=1 control'), [+(0.2 * k).toFixed(9), +(0.1 * k).toFixed(9)]);
    assert.deepEqual(diffs('P=1 control − P=1 (the projection alone)'), [
      +(-0.3 * k).toFixed(9),
      +(-0.3 * k).toFixed(9),
    ]);
    assert.ok(!rows.some((r) => r.stages === 4), 'a control without its depth in the preset is left out');
    assert.match(formatExcess(preset, rows), /fresco − its P=1 control +\+0\.\d{3} \[/);
  });

  it('trains a run once and takes it from the cache after, under a key that names its spec', async function () {
    this.timeout(120_000);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-sweep-'));
    const data = path.join(dir, 'corpus.txt');
    fs.writeFileSync(data, 'to be or not to be, that is the question. '.repeat(200));
    const tiny: SweepPreset = { ...preset, layers: 2, width: 8, rows: 16, updates: 6 };
    const spec = { stages: 2, method: 'stash', lr: 1e-2, seed: 0, alpha: 0.25 } as const;
    const logged: string[] = [];
    try {
      const first = await cachedRun(dir, tiny, spec, data, (s) => logged.push(s));
      const again = await cachedRun(dir, tiny, spec, data, (s) => logged.push(s));
      assert.equal(logged.length, 1);
      assert.deepEqual(again, first);
      assert.equal(first.losses.length, 6);
      assert.ok(first.losses.every(Number.isFinite));
      assert.ok(first.extraStateBytes > 0, 'stash holds weights while a microbatch is in flight');
      assert.notEqual(runKey(tiny, spec), runKey(tiny, { ...spec, seed: 1 }));
      assert.notEqual(runKey(tiny, spec), runKey({ ...tiny, rows: 32 }, spec));
      assert.match(runKey(tiny, spec), /^P2-stash-lr0.01-s0-a0.25-[0-9a-f]{8}$/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
