// What a consistency policy carries from update to update, apart from what it keeps per
// microbatch in flight: SpecTrain's smoothed step and its count, LWP's last step,
// PipeMare's update EMA and count. An asynchronous stage's snapshot holds it
// (actors/param-store-snapshot.ts) so a stage resumed after a loss predicts and corrects
// as it did; per-microbatch state (stash's copies, FRESCO's bases) is not part of it, since
// a recovery drops every microbatch in flight.

import { ConsistencyError } from './policy';

export interface RunningState {
  /** The policy's name (ConsistencyPolicy.name): a state loads only into the same policy. */
  readonly policy: string;
  readonly counts: Record<string, number>;
  /** Per-parameter arrays by what they are (e.g. `v`), each by parameter name. */
  readonly arrays: Record<string, Record<string, Float32Array>>;
}

/** Copies of a policy's per-parameter arrays. */
export function copyArrays(m: ReadonlyMap<string, Float32Array>): Record<string, Float32Array> {
  return Object.fromEntries([...m].map(([n, a]) => [n, Float32Array.from(a)]));
}

/** The count `key` of `s`, refused unless a non-negative integer. */
export function countOf(s: RunningState, key: string): number {
  const v = s.counts[key];
  if (!Number.isSafeInteger(v) || v < 0)
    throw new ConsistencyError(`${s.policy}: running state's ${key} is ${String(v)}, not a count`);
  return v;
}

/** `into` becomes copies of `s.arrays[what]` (none when absent), for policy `policy` only. */
export function loadArrays(policy: string, s: RunningState, what: string, into: Map<string, Float32Array>): void {
  if (s.policy !== policy) throw new ConsistencyError(`${policy}: cannot load the running state of ${s.policy}`);
  into.clear();
  for (const [n, a] of Object.entries(s.arrays[what] ?? {})) into.set(n, Float32Array.from(a));
}

/** What is wrong with `v` as a running state, or null. */
export function runningStateProblem(v: unknown): string | null {
  const isMap = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);
  if (!isMap(v) || typeof v.policy !== 'string' || !isMap(v.counts) || !isMap(v.arrays))
    return 'not a map of policy (text), counts and arrays (maps)';
  for (const c of Object.values(v.counts))
    if (!Number.isSafeInteger(c) || (c as number) < 0) return 'a count is not one';
  for (const group of Object.values(v.arrays)) {
    if (!isMap(group)) return 'an array group is not a map';
    for (const a of Object.values(group)) if (!(a instanceof Float32Array)) return 'an array is not float32';
  }
  return null;
}
