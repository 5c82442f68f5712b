// The one collective tensor-parallel and data-parallel compute needs. The model code calls it
// without knowing who its peers are; the actors that host a rank (or a replica) provide it over
// the bus. Summing in rank order makes the result independent of the order messages arrive in.

/**
 * Sums `data` elementwise across the members of a group (the ranks of a TP group, or the replicas
 * of a stage), adding the members' arrays in member order 0, 1, …; every member gets the same sum.
 * `key` names this collective and is the same on every member (e.g. `it3/F5.0/attn-out`), so
 * concurrent collectives cannot be confused. `data` is not modified.
 */
export type AllReduce<A extends Floats = Float32Array> = (key: string, data: A) => Promise<A>;

/** The arrays a group sums: float32 activations and gradients, float64 partial gradient sums (the replicas'). */
export type Floats = Float32Array | Float64Array;

/**
 * The member-order sum of `parts` (all of one length and dtype) in their dtype: a copy of
 * member 0's array, then members 1, 2, … added in turn. Every implementation of AllReduce
 * sums with it, so they agree to the bit whatever order the parts arrived in.
 */
export function sumInOrder<A extends Floats>(parts: readonly A[]): A {
  if (parts.length === 0) throw new RangeError('sumInOrder needs at least one part');
  const out = parts[0]!.slice() as A;
  for (let m = 1; m < parts.length; m++) {
    const p = parts[m]!;
    for (let i = 0; i < out.length; i++) out[i] += p[i]!;
  }
  return out;
}
