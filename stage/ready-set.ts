// The ready buffers of one stage for one iteration, in the canonical order policies
// expect (see policies/hint.ts): F by (chunk asc, mb asc), B and W by (chunk desc, mb asc).
// The lists are this set's own (a policy reads them without a copy); their tasks are frozen.

import { ReadyView } from '../policies/hint';
import { PipelineShape, Task, taskIndex } from '../policies/task';

function forwardOrder(a: Task, b: Task): number {
  return a.chunk - b.chunk || a.mb - b.mb;
}

function backwardOrder(a: Task, b: Task): number {
  return b.chunk - a.chunk || a.mb - b.mb;
}

function insertSorted(list: Task[], t: Task, cmp: (a: Task, b: Task) => number): void {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (cmp(list[mid], t) < 0) lo = mid + 1;
    else hi = mid;
  }
  list.splice(lo, 0, t);
}

export class ReadySet implements ReadyView {
  readonly F: Task[] = [];
  readonly B: Task[] = [];
  readonly W: Task[] = [];
  private readonly flags: Uint8Array;

  constructor(private readonly shape: PipelineShape) {
    this.flags = new Uint8Array(3 * shape.chunks * shape.microbatches);
  }

  has(t: Task): boolean {
    return this.flags[taskIndex(t, this.shape)] === 1;
  }

  get size(): number {
    return this.F.length + this.B.length + this.W.length;
  }

  /** Adds `t`, frozen: the lists hand their tasks to policies, and a task a policy changed
   * in place would no longer be the one its flag stands for. */
  add(t: Task): void {
    const i = taskIndex(t, this.shape);
    if (this.flags[i]) return;
    this.flags[i] = 1;
    Object.freeze(t);
    if (t.kind === 'F') insertSorted(this.F, t, forwardOrder);
    else insertSorted(t.kind === 'B' ? this.B : this.W, t, backwardOrder);
  }

  remove(t: Task): void {
    const i = taskIndex(t, this.shape);
    if (!this.flags[i]) return;
    this.flags[i] = 0;
    const list = t.kind === 'F' ? this.F : t.kind === 'B' ? this.B : this.W;
    const at = list.findIndex((x) => x.mb === t.mb && x.chunk === t.chunk);
    list.splice(at, 1);
  }
}
