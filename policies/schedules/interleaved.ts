// Interleaved 1F1B (Megatron's schedule for V >= 2 virtual stages per physical stage).
//
// The stage runs its V*M forwards in groups of P microbatches per chunk: the k-th
// forward is chunk floor((k mod P*V) / P) of microbatch floor(k / P*V)*P + k mod P;
// the k-th backward is the same with the chunk mirrored (V-1-c). Stage s warms up
// with 2(P-s-1) + (V-1)P forwards (capped at V*M), then alternates one forward and
// one backward, then cools down. This is the current Megatron rule (group size P);
// it has no special case for M = P.
//
// Refused: V = 1 (that is 1f1b; the warm-up rule above would differ from it, so the
// name would silently mean a different schedule) and M not a multiple of P (Megatron
// refuses it too: the groups of P microbatches must tile the iteration).

import { PipelineShape, ShapeError, Task, task } from '../task';
import { ScheduleBuilder, backward, checkStage } from './common';

function check(shape: PipelineShape): void {
  checkStage('interleaved-1f1b', shape, 0);
  const { stages: P, chunks: V, microbatches: M } = shape;
  if (V < 2)
    throw new ShapeError(`interleaved-1f1b needs chunks >= 2, got chunks = ${V}; use 1f1b for one chunk per stage`);
  if (M % P !== 0)
    throw new ShapeError(
      `interleaved-1f1b needs microbatches to be a multiple of stages, got microbatches = ${M}, stages = ${P} ` +
        `(${M} mod ${P} = ${M % P}); nearest valid: ${nearestMultiples(M, P).join(' or ')}`,
    );
}

function nearestMultiples(M: number, P: number): number[] {
  const below = Math.floor(M / P) * P;
  const above = below + P;
  return below >= P ? [below, above] : [above];
}

function nth(k: number, forward: boolean, P: number, V: number): { mb: number; chunk: number } {
  const group = P * V;
  const c = Math.floor((k % group) / P);
  return { mb: Math.floor(k / group) * P + (k % P), chunk: forward ? c : V - 1 - c };
}

function build(shape: PipelineShape, stage: number): Task[] {
  check(shape);
  checkStage('interleaved-1f1b', shape, stage);
  const { stages: P, chunks: V, microbatches: M } = shape;
  const total = V * M;
  const warmup = Math.min(2 * (P - stage - 1) + (V - 1) * P, total);
  const fwd = (k: number) => {
    const n = nth(k, true, P, V);
    return task('F', n.mb, n.chunk);
  };
  const bwd = (k: number) => {
    const n = nth(k, false, P, V);
    return backward(shape, n.mb, n.chunk);
  };
  const out: Task[] = [];
  for (let k = 0; k < warmup; k++) out.push(fwd(k));
  for (let i = 0; i < total - warmup; i++) {
    out.push(fwd(warmup + i));
    out.push(...bwd(i));
  }
  for (let k = total - warmup; k < total; k++) out.push(...bwd(k));
  return out;
}

export const interleaved1F1B: ScheduleBuilder = { name: 'interleaved-1f1b', splitBackward: false, check, build };
