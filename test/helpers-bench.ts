import { strict as assert } from 'assert';

/** `order(r)`, the two sides of repeat r, puts `a` first in even repeats and `b` in odd ones, and always holds both. */
export function assertAlternates(order: (r: number) => readonly string[], a: string, b: string): void {
  assert.deepEqual(
    [0, 1, 2, 3].map((r) => order(r)[0]),
    [a, b, a, b],
  );
  for (const r of [0, 1]) assert.deepEqual([...order(r)].sort(), [a, b].sort());
}
