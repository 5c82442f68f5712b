import { SeededRandom } from '../models/seeded-init';

/**
 * Values for a tensor of `shape` drawn from `rng`: small integers from −3 to 3 (sums and
 * products of them are exact in float32, so kernels must agree exactly) or standard normals.
 */
export function valuesOfShape(rng: SeededRandom, shape: readonly number[], integers: boolean): Float32Array {
  const n = shape.reduce((x, y) => x * y, 1);
  return Float32Array.from({ length: n }, () => (integers ? rng.int(7) - 3 : rng.normal()));
}
