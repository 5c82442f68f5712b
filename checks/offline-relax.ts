// A diagnostic relaxation of one iteration's instance, to tell which side of a gap between
// the offline reference (checks/offline-reference.ts) and the lower bound
// (checks/lower-bound.ts) is loose: the same realized durations with some physical stages
// made free, i.e. their tasks take no time on the stage (so they never queue behind each
// other there) and their compute time moves onto the message each task sends next:
// F(j,v) onto its activation message, B(j,v) onto its gradient message, and at the loss
// stage F and B both onto the gradient message. Every dependency path keeps its length, so
// the critical path, the heads and tails and the slot bound's round trips are the same; only
// the one-task-at-a-time rule at the freed stages is dropped (their in-flight limit stays).
// Any schedule of the original is one of the relaxation, so the relaxation's optimum is at
// most the original's. If the offline search lands near the bound with every stage but the
// bound's own freed, and far from it once a given stage is serial again, the distance is that
// stage's queueing, which the bound does not model (or the search misses there).
// Stage 0 cannot be freed (its backward sends no message to carry the time), nor a split
// backward's stages (W sends none either).

import { PipelineShape, Task, validateShape } from '../policies/task';
import { DurationModel } from '../models/durations';

export class RelaxError extends Error {
  override name = 'RelaxError';
}

/** `d` with the physical stages in `free` made free (see above). */
export function freeStages(shape: PipelineShape, d: DurationModel, free: readonly number[]): DurationModel {
  validateShape(shape);
  const { stages: P, chunks: V, splitBackward: split } = shape;
  if (split) throw new RelaxError('relaxation: a split backward has no message to carry W, so no stage can be freed');
  for (const s of free)
    if (!Number.isInteger(s) || s < 1 || s >= P)
      throw new RelaxError(`relaxation: stages 1..${P - 1} can be freed, got ${JSON.stringify(s)}`);
  const isFree = new Set(free);
  const last = P * V - 1;
  const compute = (it: number, stage: number, t: Task) => (isFree.has(stage) ? 0 : d.compute(it, stage, t));
  const comm = (it: number, stage: number, t: Task) => {
    const c = d.comm(it, stage, t);
    if (!isFree.has(stage)) return c;
    const own = d.compute(it, stage, t);
    // The loss stage's F sends nothing: its time goes with the B after it.
    if (t.kind === 'B' && t.chunk * P + stage === last) return c + own + d.compute(it, stage, { ...t, kind: 'F' });
    return c + own;
  };
  return { ...d, shape, compute, comm, profile: d.profile } as DurationModel;
}

/** Parse a stage list such as "1-6" or "1,2,7" (the bench's --relax flag). */
export function parseStages(spec: string, stages: number): number[] {
  const out: number[] = [];
  for (const part of spec.split(',')) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part.trim());
    if (!m) throw new RelaxError(`relaxation: a stage list is like 1-6 or 1,2,7, got ${JSON.stringify(spec)}`);
    const [a, b] = [Number(m[1]), Number(m[2] ?? m[1])];
    if (b < a) throw new RelaxError(`relaxation: range ${part} runs backwards`);
    for (let s = a; s <= b; s++) out.push(s);
  }
  for (const s of out)
    if (s < 1 || s >= stages) throw new RelaxError(`relaxation: stages 1..${stages - 1} can be freed, got ${s}`);
  return [...new Set(out)].sort((x, y) => x - y);
}
