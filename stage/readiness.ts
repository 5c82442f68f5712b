// Readiness bookkeeping of one stage (RRFP appendix C.1 buffers): an iteration's start,
// the arrival of a forward input or a gradient, and the completion of a task, which
// makes its successors ready and emits its sends. It does not choose what runs next
// (stage-logic.ts arbitrates) and checks no iteration number: its caller does.

import { StageContext } from '../policies/hint';
import {
  StageChunk,
  Task,
  backwardSuccessor,
  forwardSuccessor,
  formatTask,
  isLossStage,
  kindsOf,
  task,
  taskIndex,
} from '../policies/task';
import { ReadySet } from './ready-set';
import { IterationState, StageEffect, StageProtocolError, StageState } from './stage-state';

export function contextOf(s: StageState, it: IterationState): StageContext {
  const shape = s.setup.shape;
  return {
    stage: s.setup.stage,
    shape,
    done: (t: Task) => it.done[taskIndex(t, shape)] === 1,
    inflight: s.inflight,
    firstUnfinished: it.firstUnfinished,
  };
}

export function startIteration(s: StageState, iteration: number, now: number, fx: StageEffect[]): void {
  const { shape, stage } = s.setup;
  const policy = s.policy.arbiter;
  const n = shape.chunks * shape.microbatches;
  const it: IterationState = {
    iteration,
    inputs: new Uint8Array(n),
    grads: new Uint8Array(n),
    done: new Uint8Array(3 * n),
    ready: new ReadySet(shape),
    remaining: n * kindsOf(shape).length,
    ranOfMb: new Uint32Array(shape.microbatches),
    tasksPerMb: shape.chunks * kindsOf(shape).length,
    firstUnfinished: 0,
    memo: undefined,
    idleSince: now,
    idleReason: 'nothing-ready',
  };
  s.current = it;
  it.memo = policy.start(contextOf(s, it));
  fx.push({ type: 'event', event: { type: 'iteration-start', t: now, stage, iteration } });
}

export function checkInShape(s: StageState, kind: 'input' | 'grad', mb: number, chunk: number): void {
  const shape = s.setup.shape;
  if (
    !Number.isInteger(mb) ||
    mb < 0 ||
    mb >= shape.microbatches ||
    !Number.isInteger(chunk) ||
    chunk < 0 ||
    chunk >= shape.chunks
  )
    throw new StageProtocolError(
      `stage ${s.setup.stage}: ${kind} for microbatch ${mb} chunk ${chunk} is outside M=${shape.microbatches}, V=${shape.chunks}`,
    );
}

/** Mark an arrival (checked against the shape when it came) of a forward input or a gradient; a duplicate is a protocol error. */
export function arrive(s: StageState, it: IterationState, kind: 'input' | 'grad', mb: number, chunk: number): void {
  const shape = s.setup.shape;
  const slot = chunk * shape.microbatches + mb;
  if (kind === 'input') {
    if (it.inputs[slot])
      throw new StageProtocolError(
        `stage ${s.setup.stage}: duplicate input for ${formatTask(task('F', mb, chunk))} in iteration ${it.iteration}`,
      );
    it.inputs[slot] = 1;
    it.ready.add(task('F', mb, chunk));
  } else {
    if (isLossStage(s.setup.stage, chunk, shape))
      throw new StageProtocolError(
        `stage ${s.setup.stage}: gradient for ${formatTask(task('B', mb, chunk))} at the loss stage, which makes its own`,
      );
    if (it.grads[slot])
      throw new StageProtocolError(
        `stage ${s.setup.stage}: duplicate gradient for ${formatTask(task('B', mb, chunk))} in iteration ${it.iteration}`,
      );
    it.grads[slot] = 1;
    if (it.done[taskIndex(task('F', mb, chunk), shape)]) it.ready.add(task('B', mb, chunk));
  }
}

/**
 * Hands what finished task `t` made to the task that takes it: on this stage it arrives at
 * once (a local effect, for the trace); on another stage it is sent as an activation or gradient.
 */
function handOn(
  s: StageState,
  it: IterationState,
  t: Task,
  to: StageChunk,
  kind: 'input' | 'grad',
  fx: StageEffect[],
): void {
  if (to.stage === s.setup.stage) {
    arrive(s, it, kind, t.mb, to.chunk);
    fx.push({ type: 'local', iteration: it.iteration, task: t, kind, dstChunk: to.chunk });
  } else {
    const message = kind === 'input' ? 'activation' : 'gradient';
    fx.push({ type: 'send', iteration: it.iteration, task: t, kind: message, dst: to.stage, dstChunk: to.chunk });
  }
}

export function complete(
  s: StageState,
  it: IterationState,
  t: Task,
  now: number,
  fx: StageEffect[],
  loss?: number,
): void {
  const { shape, stage } = s.setup;
  it.done[taskIndex(t, shape)] = 1;
  it.remaining--;
  it.ranOfMb[t.mb]++;
  while (it.firstUnfinished < shape.microbatches && it.ranOfMb[it.firstUnfinished] === it.tasksPerMb)
    it.firstUnfinished++;
  fx.push({
    type: 'event',
    event: {
      type: 'task-end',
      t: now,
      stage,
      iteration: it.iteration,
      kind: t.kind,
      mb: t.mb,
      chunk: t.chunk,
      // A non-finite loss (a diverged run) would not survive JSON on the wire: it is left out.
      ...(loss !== undefined && Number.isFinite(loss) ? { loss } : {}),
    },
  });
  const slot = t.chunk * shape.microbatches + t.mb;
  if (t.kind === 'F') {
    const next = forwardSuccessor(stage, t.chunk, shape);
    if (next === null) it.ready.add(task('B', t.mb, t.chunk));
    else handOn(s, it, t, next, 'input', fx);
    if (it.grads[slot]) it.ready.add(task('B', t.mb, t.chunk));
  } else if (t.kind === 'B') {
    const prev = backwardSuccessor(stage, t.chunk, shape);
    if (prev !== null) handOn(s, it, t, prev, 'grad', fx);
    if (shape.splitBackward) it.ready.add(task('W', t.mb, t.chunk));
    else s.inflight--;
  } else {
    s.inflight--;
  }
  if (it.remaining === 0) {
    fx.push({ type: 'event', event: { type: 'iteration-end', t: now, stage, iteration: it.iteration } });
    fx.push({ type: 'finished', iteration: it.iteration, peakInflight: s.peakInflight });
    s.finished.push(it.iteration);
  }
}
