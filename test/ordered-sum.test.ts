import { strict as assert } from 'assert';
import { OrderedSum, OrderedSumError } from '../policies/optim/ordered-sum';

const f32 = (...xs: number[]) => Float32Array.from(xs);
/** A quarter of float32's unit in the last place at 1: float32 loses it when added to 1 alone. */
const QUARTER_ULP = 2 ** -25;

describe('OrderedSum', () => {
  it('adds microbatches in microbatch order whatever order they arrive in', () => {
    const a = new OrderedSum([2], 3);
    a.add(2, [f32(4, 5)]);
    assert.equal(a.added, 0);
    a.add(0, [f32(1, 2)]);
    assert.equal(a.added, 1);
    a.add(1, [f32(0.5, 0.25)]);
    assert.ok(a.complete);
    assert.deepEqual(a.result(), [f32(5.5, 7.25)]);
  });

  it('rounds to float32 once, at the end: three quarter-ulps added to 1 move it, where float32 sums would not', () => {
    const s = new OrderedSum([1], 4);
    [1, QUARTER_ULP, QUARTER_ULP, QUARTER_ULP].forEach((x, mb) => s.add(mb, [f32(x)]));
    let float32 = Math.fround(1);
    for (let i = 0; i < 3; i++) float32 = Math.fround(float32 + QUARTER_ULP);
    assert.equal(float32, 1);
    assert.deepEqual(s.result(), [f32(1 + 2 ** -23)]);
  });

  it("gives the same float32 sums when two groups' float64 partials are added as when one sum takes every microbatch", () => {
    const xs = [1, QUARTER_ULP, QUARTER_ULP, QUARTER_ULP];
    const one = new OrderedSum([1], 4);
    xs.forEach((x, mb) => one.add(mb, [f32(x)]));
    const halves = [0, 1].map((h) => {
      const s = new OrderedSum([1], 2);
      xs.slice(2 * h, 2 * h + 2).forEach((x, mb) => s.add(mb, [f32(x)]));
      return s;
    });
    const [p0, p1] = halves.map((s) => s.partials()[0]!);
    halves[0]!.setSums([Float64Array.of(p0![0]! + p1![0]!)]);
    assert.deepEqual(halves[0]!.result(), one.result());
  });

  it('rounds again after setSums, and returns the same arrays until then', () => {
    const s = new OrderedSum([1], 1);
    s.add(0, [f32(1)]);
    const r = s.result();
    assert.equal(s.result(), r);
    s.setSums([[3]]);
    assert.deepEqual(s.result(), [f32(3)]);
  });

  it('does not keep a rounding taken between reading the sums and setting them (a result() during the all-reduce)', () => {
    const s = new OrderedSum([1], 1);
    s.add(0, [f32(1)]);
    const sent = s.partials();
    assert.deepEqual(s.result(), [f32(1)]);
    s.setSums([[sent[0]![0]! + 2]]);
    assert.deepEqual(s.result(), [f32(3)]);
  });

  it('refuses sums of other sizes, and before every microbatch came', () => {
    const s = new OrderedSum([2], 2);
    assert.throws(() => s.setSums([[1, 2]]), /only 0 of 2/);
    s.add(0, [f32(1, 2)]);
    s.add(1, [f32(1, 2)]);
    assert.throws(() => s.setSums([[1]]), /parameter 0: 1 values, expected 2/);
    assert.throws(() => s.setSums([]), /0 sums for 1 parameters/);
  });

  it('refuses a microbatch twice, one outside the range, wrong sizes, and results before every microbatch came', () => {
    const s = new OrderedSum([2], 2);
    assert.throws(() => s.add(2, [f32(1, 2)]), /microbatch 2 is outside 0\.\.1/);
    assert.throws(() => s.add(0, [f32(1)]), /parameter 0: 1 values, expected 2/);
    assert.throws(() => s.add(0, []), /0 gradients for 1 parameters/);
    s.add(0, [f32(1, 2)]);
    assert.throws(() => s.add(0, [f32(1, 2)]), OrderedSumError);
    assert.throws(() => s.result(), /only 1 of 2 microbatches were added/);
    assert.throws(() => s.partials(), /only 1 of 2/);
  });

  it('reads the gradients during add only: one that waits for an earlier microbatch is copied (views may change after)', () => {
    const s = new OrderedSum([2], 3);
    const view = f32(1, 2);
    s.add(1, [view]);
    view.set([100, 200]);
    s.add(0, [view]);
    view.fill(-1);
    s.add(2, [f32(0.5, 0.5)]);
    assert.deepEqual(s.result(), [f32(101.5, 202.5)]);
  });

  it('reset empties the sums, the waiting microbatches and the rounding, for the next iteration', () => {
    const added: number[] = [];
    const s = new OrderedSum([2], 2, (sum, g) => {
      added.push(g[0]!);
      for (let k = 0; k < sum.length; k++) sum[k] += g[k]!;
    });
    s.add(0, [f32(1, 2)]);
    s.add(1, [f32(3, 4)]);
    assert.deepEqual(s.result(), [f32(4, 6)]);
    s.reset().add(1, [f32(5, 6)]);
    assert.strictEqual(s.added, 0);
    s.reset().add(0, [f32(7, 8)]);
    s.add(1, [f32(0.5, 0.25)]);
    assert.deepEqual(s.result(), [f32(7.5, 8.25)]);
    assert.deepEqual(added, [1, 3, 7, 0.5], 'the accumulation given is the one used');
  });
});
