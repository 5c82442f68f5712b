// The non-binding hint orders of RRFP (section 5 and 7.7): bf, fb, b-priority,
// f-priority and bfw. Each is a pure choice over the ready view; none ever waits
// while a task is ready.
//
// bf / fb keep one bit of memory, the phase: in phase B a ready backward wins over a
// ready forward, in phase F the reverse; running a B moves to phase F, running an F
// to phase B. W runs only when no B and no F is ready (that is the bfw order; the other
// orders treat W the same way on a split shape), and then the arbitration starts a new
// round (RRFP §7.1): the phase goes back to the policy's first (B for bf and bfw).
// Within a kind the ready view's canonical order decides (F[0], B[0], W[0]).
//
// Also here: `readyViewOf`, which builds a ReadyView in canonical order from a list
// of tasks, for planners, simulations and tests.

import { HintPolicy, ReadyView } from './hint';
import { PipelineShape, ShapeError, Task, formatTask, validateShape } from './task';

export type Phase = 'B' | 'F';

export interface PhaseMemo {
  readonly phase: Phase;
}

function firstOf(order: readonly Phase[], ready: ReadyView): Task | null {
  for (const kind of order) {
    const t = ready[kind][0];
    if (t !== undefined) return t;
  }
  return ready.W[0] ?? null;
}

function phasePolicy(name: string, first: Phase, splitBackward: boolean): HintPolicy<PhaseMemo> {
  return {
    name,
    binding: false,
    splitBackward,
    check(shape: PipelineShape) {
      validateShape(shape);
      if (splitBackward && !shape.splitBackward)
        throw new ShapeError(`${name} needs splitBackward: true (B and W as separate tasks), got false`);
    },
    start: () => ({ phase: first }),
    choose: (ready, memo) => firstOf(memo.phase === 'B' ? ['B', 'F'] : ['F', 'B'], ready),
    advance: (_memo, ran) => ({ phase: ran.kind === 'W' ? first : ran.kind === 'B' ? 'F' : 'B' }),
  };
}

function priorityPolicy(name: string, kind: Phase): HintPolicy<null> {
  const order: Phase[] = kind === 'B' ? ['B', 'F'] : ['F', 'B'];
  return {
    name,
    binding: false,
    splitBackward: false,
    check: validateShape,
    start: () => null,
    choose: (ready) => firstOf(order, ready),
    advance: () => null,
  };
}

/** Backward-forward alternation, starting with backward (RRFP's default). */
export const bf: HintPolicy<PhaseMemo> = phasePolicy('bf', 'B', false);
/** Forward-backward alternation, starting with forward. */
export const fb: HintPolicy<PhaseMemo> = phasePolicy('fb', 'F', false);
/** bf over split backward; W only when neither a B nor an F is ready. */
export const bfw: HintPolicy<PhaseMemo> = phasePolicy('bfw', 'B', true);
/** Any ready backward first, else a forward. */
export const bPriority: HintPolicy<null> = priorityPolicy('b-priority', 'B');
/** Any ready forward first, else a backward. */
export const fPriority: HintPolicy<null> = priorityPolicy('f-priority', 'F');

/** Canonical order of the ready view: F by (chunk, mb); B and W by (chunk desc, mb). */
export function compareReady(a: Task, b: Task): number {
  if (a.kind !== b.kind) return 'FBW'.indexOf(a.kind) - 'FBW'.indexOf(b.kind);
  if (a.chunk !== b.chunk) return a.kind === 'F' ? a.chunk - b.chunk : b.chunk - a.chunk;
  return a.mb - b.mb;
}

/** A ReadyView over `tasks` (any order, duplicates ignored). */
export function readyViewOf(tasks: Iterable<Task>): ReadyView {
  const byKey = new Map<string, Task>();
  for (const t of tasks) byKey.set(formatTask(t), t);
  const all = [...byKey.values()].sort(compareReady);
  return {
    F: all.filter((t) => t.kind === 'F'),
    B: all.filter((t) => t.kind === 'B'),
    W: all.filter((t) => t.kind === 'W'),
    has: (t) => byKey.has(formatTask(t)),
  };
}
