import { strict as assert } from 'assert';
import { Heap } from '../base/binary-heap';
import { SeededRandom } from '../models/seeded-init';

describe('the binary heap', () => {
  it('pops in the order `before` sets, for a max and a min order, with repeated values and interleaved pushes', () => {
    const rng = new SeededRandom(7);
    for (const before of [(a: number, b: number) => a > b, (a: number, b: number) => a < b]) {
      const heap = new Heap(before);
      const held: number[] = [];
      const popped: number[] = [];
      for (let step = 0; step < 2000; step++) {
        if (held.length > 0 && rng.int(3) === 0) {
          const top = heap.pop();
          const best = held.reduce((x, y) => (before(y, x) ? y : x));
          assert.equal(top, best);
          held.splice(held.indexOf(top), 1);
          popped.push(top);
        } else {
          const x = rng.int(50);
          heap.push(x);
          held.push(x);
        }
        assert.equal(heap.size, held.length);
        if (held.length > 0)
          assert.equal(
            heap.peek(),
            held.reduce((x, y) => (before(y, x) ? y : x)),
          );
      }
      while (heap.size > 0) popped.push(heap.pop());
      assert.ok(popped.length > 1000);
    }
  });
});
