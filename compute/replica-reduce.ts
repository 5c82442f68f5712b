// Data parallelism's side of a stage's compute: replica r of D trains on microbatches
// r·M … r·M+M−1 of each iteration, scales its loss by 1/(D·M), and at the flush its
// microbatch-ordered gradient sums are all-reduced across the replicas (summed in replica
// order) before the optimizer step, which is then the same on every replica. The sums
// travel unrounded (float64, see policies/optim/ordered-sum.ts) and are rounded to float32
// once, after the all-reduce, so D replicas of M give the gradients one pipeline of D·M
// does (bitwise, unless a sum's addends are more than 2^29 apart in magnitude).

import type { AllReduce } from '../models/all-reduce';
import { OrderedSum } from '../policies/optim/ordered-sum';
import { TrainingComputeError } from './chunk-optimizer';
import { MESSAGE_ALLOWANCE } from './training-boundary';

/** Where a stage (or TP rank) sits among the replicas of a data-parallel job. */
export interface ReplicaGroup {
  readonly replica: number;
  readonly replicas: number;
  /** Sums float64 partial sums across the replicas of this stage (and rank), in replica order. */
  readonly allReduce: AllReduce<Float64Array>;
}

export function checkReplicaGroup(g: ReplicaGroup): void {
  if (
    !Number.isInteger(g.replicas) ||
    g.replicas < 1 ||
    !Number.isInteger(g.replica) ||
    g.replica < 0 ||
    g.replica >= g.replicas
  )
    throw new TrainingComputeError(`replica ${g.replica} of ${g.replicas}: not a replica of a data-parallel job`);
}

/** The part a replica sends each peer at the flush: its float64 gradient sums, 8 bytes a parameter. */
export function replicaReduceMessage(params: number): { what: string; bytes: number } {
  return { what: "the replicas' gradient all-reduce (float64 sums)", bytes: 8 * params + MESSAGE_ALLOWANCE };
}

/** The iteration's microbatch whose data local microbatch `mb` of `microbatches` trains on. */
export function dataMicrobatch(g: ReplicaGroup | undefined, microbatches: number, mb: number): number {
  return g ? g.replica * microbatches + mb : mb;
}

/** The last stage's loss scale: the mean over every replica's microbatches. */
export function lossScaleFor(g: ReplicaGroup | undefined, microbatches: number): number {
  return 1 / ((g?.replicas ?? 1) * microbatches);
}

/** Replaces each chunk's float64 gradient sums by their sum across the replicas (one all-reduce of them all). */
export async function reduceAcrossReplicas(g: ReplicaGroup, key: string, sums: readonly OrderedSum[]): Promise<void> {
  const parts = sums.flatMap((s) => s.partials());
  const flat = new Float64Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    flat.set(p, at);
    at += p.length;
  }
  const total = await g.allReduce(key, flat);
  if (total.length !== flat.length)
    throw new TrainingComputeError(`${key}: the replicas' all-reduce gave ${total.length} values for ${flat.length}`);
  at = 0;
  for (const s of sums)
    s.setSums(
      s.partials().map((p) => {
        at += p.length;
        return total.subarray(at - p.length, at);
      }),
    );
}

/** Told, at each flush, the gradient sums the optimizer steps with (after the replicas' all-reduce), by parameter name. */
export type FlushObserver = (iteration: number, grads: ReadonlyMap<string, Float32Array>) => void;

/** The chunks' sums by parameter name, for a FlushObserver. */
export function namedSums(
  chunks: readonly { names: readonly string[]; sum: OrderedSum | null }[],
): Map<string, Float32Array> {
  const out = new Map<string, Float32Array>();
  for (const c of chunks) c.sum?.result().forEach((g, i) => out.set(c.names[i]!, g));
  return out;
}

/**
 * Makes a flush's gradient sums final: all-reduced across the replicas (when data-parallel),
 * then shown to `onFlush`. Every chunk must have its sum.
 */
export async function finishSums(
  chunks: readonly { names: readonly string[]; sum: OrderedSum | null }[],
  iteration: number,
  dp: ReplicaGroup | undefined,
  onFlush: FlushObserver | undefined,
): Promise<void> {
  if (dp)
    await reduceAcrossReplicas(
      dp,
      `it${iteration}/dp-grads`,
      chunks.map((c) => c.sum!),
    );
  onFlush?.(iteration, namedSums(chunks));
}
