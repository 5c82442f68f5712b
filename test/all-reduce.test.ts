import { strict as assert } from 'assert';
import { sumInOrder } from '../models/all-reduce';

describe('all-reduce (the member-order sum)', () => {
  it('adds the members in order 0, 1, … in the arrays own precision, leaving them unchanged', () => {
    // In float32 1 + 1e8 rounds to 1e8, so 1 + 1e8 + -1e8 is 0 while -1e8 + 1e8 + 1 is 1: the order shows.
    const parts = [new Float32Array([1, 2]), new Float32Array([1e8, 3]), new Float32Array([-1e8, 4])];
    const copy = parts.map((p) => p.slice());
    const sum = sumInOrder(parts);
    assert.ok(sum instanceof Float32Array);
    assert.deepEqual(Array.from(sum), [0, 9]);
    assert.deepEqual(Array.from(sumInOrder([...parts].reverse())), [1, 9]);
    assert.deepEqual(parts, copy);
    assert.notEqual(sum, parts[0]);
  });

  it('keeps float64 parts in float64 and a lone member its own values, signed zeros included', () => {
    const sum = sumInOrder([new Float64Array([0.1]), new Float64Array([0.2])]);
    assert.ok(sum instanceof Float64Array);
    assert.equal(sum[0], 0.1 + 0.2);
    assert.ok(Object.is(sumInOrder([new Float32Array([-0])])[0], -0));
    assert.throws(() => sumInOrder([]), /at least one part/);
  });
});
