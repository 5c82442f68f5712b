// The stage's logic as a pure transition: step(state, message, now) -> effects.
// It owns readiness (RRFP appendix C.1 buffers) and the arbiter behavior; the stage
// actor performs the effects (compute, sends, reports). No clock, bus or tfjs here.
//
// Buffers per iteration: forward-ready = inputs that arrived (the data at the first
// virtual stage) and whose F has not run; forward-finished and backward-finished live
// in the sender mailbox until the send completes; backward-ready = gradients that
// arrived. A forward input is retained (counted in `inflight`) from F until its B
// completes (its W when backward is split), which is what backpressure bounds.

import { Arbiter } from '../policies/arbiter';
import { StageContext } from '../policies/hint';
import {
  PipelineShape,
  Task,
  backwardSuccessor,
  forwardSuccessor,
  formatTask,
  isLossStage,
  kindsOf,
  task,
  taskIndex,
  taskProblem,
} from '../policies/task';
import { quoteValue } from '../base/quote';
import { TensorPayload } from '../transport/envelope';
import { BatonEvent, ReceiveEvent } from './events';
import { ReadySet } from './ready-set';

export interface StageSetup {
  readonly stage: number;
  readonly shape: PipelineShape;
  /** The stage's policy with its buffer limit (policies/arbiter.ts). */
  readonly arbiter: Arbiter;
  /** The job's first iteration: its first start must be for it (default: any). */
  readonly firstIteration?: number;
  /**
   * Arbitrate only when asked ('arbitrate'), after a change asks for it ('arbitrate-later'):
   * on the virtual clock the actor asks once everything due at this instant has been
   * delivered, so a task's end and an input arriving at the same instant are seen
   * together, as the hint order would rank them, not in the order the actors' messages
   * happened to take (default: arbitrate at once).
   */
  readonly settleBeforeArbitration?: boolean;
}

export type StageMsg =
  | { readonly type: 'start'; readonly iteration: number }
  | {
      readonly type: 'input';
      readonly iteration: number;
      readonly mb: number;
      readonly chunk: number;
      readonly tensors?: readonly TensorPayload[];
      readonly receipt?: ReceiveEvent;
    }
  | {
      readonly type: 'grad';
      readonly iteration: number;
      readonly mb: number;
      readonly chunk: number;
      readonly tensors?: readonly TensorPayload[];
      readonly receipt?: ReceiveEvent;
    }
  | {
      readonly type: 'done';
      readonly iteration: number;
      readonly task: Task;
      readonly tensors?: readonly TensorPayload[];
    }
  /** Arbitrate now (with settleBeforeArbitration, after an 'arbitrate-later'). */
  | { readonly type: 'arbitrate' };

export type StageEffect =
  | { readonly type: 'run'; readonly iteration: number; readonly task: Task }
  | {
      readonly type: 'send';
      readonly iteration: number;
      readonly task: Task;
      readonly kind: 'activation' | 'gradient';
      readonly dst: number;
      readonly dstChunk: number;
    }
  | {
      readonly type: 'local';
      readonly iteration: number;
      readonly task: Task;
      readonly kind: 'input' | 'grad';
      readonly dstChunk: number;
    }
  | { readonly type: 'finished'; readonly iteration: number; readonly peakInflight: number }
  /** Send 'arbitrate' once what is due at this instant has arrived (settleBeforeArbitration). */
  | { readonly type: 'arbitrate-later' }
  | { readonly type: 'event'; readonly event: BatonEvent };

/** A peer's message the stage cannot take (rejected; the stage carries on). */
export class StageProtocolError extends Error {
  override name = 'StageProtocolError';
}

/** The policy broke its contract (picked a task that is not ready): the job fails, naming it. */
export class PolicyError extends Error {
  override name = 'PolicyError';
}

interface IterationState {
  readonly iteration: number;
  readonly inputs: Uint8Array; // [chunk][mb] forward input arrived
  readonly grads: Uint8Array; // [chunk][mb] gradient arrived
  readonly done: Uint8Array; // taskIndex -> ran
  readonly ready: ReadySet;
  remaining: number;
  readonly ranOfMb: Uint32Array; // [mb] tasks that ran, of tasksPerMb
  readonly tasksPerMb: number; // V * kinds
  firstUnfinished: number; // lowest mb with a task not yet run
  memo: unknown;
  idleSince: number | null;
  idleReason: 'nothing-ready' | 'binding' | 'backpressure';
}

export interface StageState {
  readonly setup: StageSetup;
  current: IterationState | null;
  running: { iteration: number; task: Task } | null;
  inflight: number;
  peakInflight: number;
  /** Arrivals for iterations this stage has not started yet (possible over NATS). */
  early: StageMsg[];
  finished: number[];
  /** An 'arbitrate-later' is out and its 'arbitrate' has not come. */
  arbitrationAsked: boolean;
}

export function initialStageState(setup: StageSetup): StageState {
  return {
    setup,
    current: null,
    running: null,
    inflight: 0,
    peakInflight: 0,
    early: [],
    finished: [],
    arbitrationAsked: false,
  };
}

/** A snapshot for diagnostics (deadlock errors, status queries). */
export interface StageStatus {
  stage: number;
  iteration: number | null;
  running: string | null;
  remaining: number;
  inflight: number;
  forwardReady: string[];
  backwardReady: string[];
  weightReady: string[];
  waitingFor: string[];
  idleSince: number | null;
  /** Inputs and gradients held for an iteration this stage has not started (its start has not come). */
  held: number;
  /** The iteration those held arrivals belong to, null when none is held. */
  heldIteration: number | null;
}

export function stageStatus(s: StageState): StageStatus {
  const it = s.current;
  const shape = s.setup.shape;
  const waitingFor: string[] = [];
  if (it) {
    for (let c = 0; c < shape.chunks; c++)
      for (let j = 0; j < shape.microbatches; j++) {
        const f = task('F', j, c);
        const b = task('B', j, c);
        if (!it.done[taskIndex(f, shape)] && !it.inputs[c * shape.microbatches + j])
          waitingFor.push(`${formatTask(f)} (input)`);
        else if (
          it.done[taskIndex(f, shape)] &&
          !it.done[taskIndex(b, shape)] &&
          !it.grads[c * shape.microbatches + j] &&
          !isLossStage(s.setup.stage, c, shape)
        )
          waitingFor.push(`${formatTask(b)} (gradient)`);
      }
  }
  return {
    stage: s.setup.stage,
    iteration: it ? it.iteration : null,
    running: s.running ? formatTask(s.running.task) : null,
    remaining: it ? it.remaining : 0,
    inflight: s.inflight,
    forwardReady: it ? it.ready.F.map(formatTask) : [],
    backwardReady: it ? it.ready.B.map(formatTask) : [],
    weightReady: it ? it.ready.W.map(formatTask) : [],
    waitingFor,
    idleSince: it ? it.idleSince : null,
    held: s.early.length,
    heldIteration: s.early.length > 0 ? (s.early[0] as { iteration: number }).iteration : null,
  };
}

function contextOf(s: StageState, it: IterationState): StageContext {
  const shape = s.setup.shape;
  return {
    stage: s.setup.stage,
    shape,
    done: (t: Task) => it.done[taskIndex(t, shape)] === 1,
    inflight: s.inflight,
    firstUnfinished: it.firstUnfinished,
  };
}

function startIteration(s: StageState, iteration: number, now: number, fx: StageEffect[]): void {
  const { shape, stage, arbiter: policy } = s.setup;
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

function checkInShape(s: StageState, kind: 'input' | 'grad', mb: number, chunk: number): void {
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
function arrive(s: StageState, it: IterationState, kind: 'input' | 'grad', mb: number, chunk: number): void {
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

function complete(s: StageState, it: IterationState, t: Task, now: number, fx: StageEffect[]): void {
  const { shape, stage } = s.setup;
  it.done[taskIndex(t, shape)] = 1;
  it.remaining--;
  it.ranOfMb[t.mb]++;
  while (it.firstUnfinished < shape.microbatches && it.ranOfMb[it.firstUnfinished] === it.tasksPerMb)
    it.firstUnfinished++;
  fx.push({
    type: 'event',
    event: { type: 'task-end', t: now, stage, iteration: it.iteration, kind: t.kind, mb: t.mb, chunk: t.chunk },
  });
  const slot = t.chunk * shape.microbatches + t.mb;
  if (t.kind === 'F') {
    const next = forwardSuccessor(stage, t.chunk, shape);
    if (next === null) it.ready.add(task('B', t.mb, t.chunk));
    else if (next.stage === stage) {
      arrive(s, it, 'input', t.mb, next.chunk);
      fx.push({ type: 'local', iteration: it.iteration, task: t, kind: 'input', dstChunk: next.chunk });
    } else
      fx.push({
        type: 'send',
        iteration: it.iteration,
        task: t,
        kind: 'activation',
        dst: next.stage,
        dstChunk: next.chunk,
      });
    if (it.grads[slot]) it.ready.add(task('B', t.mb, t.chunk));
  } else if (t.kind === 'B') {
    const prev = backwardSuccessor(stage, t.chunk, shape);
    if (prev !== null) {
      if (prev.stage === stage) {
        arrive(s, it, 'grad', t.mb, prev.chunk);
        fx.push({ type: 'local', iteration: it.iteration, task: t, kind: 'grad', dstChunk: prev.chunk });
      } else
        fx.push({
          type: 'send',
          iteration: it.iteration,
          task: t,
          kind: 'gradient',
          dst: prev.stage,
          dstChunk: prev.chunk,
        });
    }
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

function arbitrate(s: StageState, now: number, fx: StageEffect[]): void {
  const it = s.current;
  if (!it || s.running || it.remaining === 0) return;
  const { stage, arbiter } = s.setup;
  const ctx = contextOf(s, it);
  const { task: choice, backpressure } = arbiter.pick(it.ready, it.memo, ctx);
  if (choice === null) {
    if (it.idleSince === null) {
      it.idleSince = now;
      it.idleReason = backpressure
        ? 'backpressure'
        : arbiter.binding && it.ready.size > 0
          ? 'binding'
          : 'nothing-ready';
    }
    return;
  }
  // Checked before anything is looked up by it (an out-of-range task's index is another
  // task's), and copied, so the policy's object is not the one the stage runs and records.
  const problem = taskProblem(choice, s.setup.shape);
  if (problem !== null)
    throw new PolicyError(
      `stage ${stage}: policy ${arbiter.name} returned ${quoteValue(choice)}, which is not a task of this pipeline (${problem}); a policy returns a ready task or null to wait`,
    );
  const pick = task(choice.kind, choice.mb, choice.chunk);
  if (!it.ready.has(pick))
    throw new PolicyError(
      `stage ${stage}: policy ${arbiter.name} picked ${formatTask(pick)}, which is not ready (ready: ${[...it.ready.B, ...it.ready.F, ...it.ready.W].map(formatTask).join(' ') || 'none'})`,
    );
  it.ready.remove(pick);
  it.memo = arbiter.advance(it.memo, pick, ctx);
  if (pick.kind === 'F') {
    s.inflight++;
    if (s.inflight > s.peakInflight) s.peakInflight = s.inflight;
  }
  if (it.idleSince !== null) {
    const ms = now - it.idleSince;
    if (ms > 0)
      fx.push({
        type: 'event',
        event: { type: 'wait', t: it.idleSince, stage, iteration: it.iteration, ms, reason: it.idleReason },
      });
    it.idleSince = null;
  }
  s.running = { iteration: it.iteration, task: pick };
  fx.push({
    type: 'event',
    event: {
      type: 'task-start',
      t: now,
      stage,
      iteration: it.iteration,
      kind: pick.kind,
      mb: pick.mb,
      chunk: pick.chunk,
      inflight: s.inflight,
      backpressure,
    },
  });
  fx.push({ type: 'run', iteration: it.iteration, task: pick });
}

/** The transition. Mutates `s` in place (it is owned by one actor) and returns the effects. */
export function stageStep(s: StageState, msg: StageMsg, now: number): StageEffect[] {
  const fx: StageEffect[] = [];
  const { stage } = s.setup;
  switch (msg.type) {
    case 'start': {
      if (s.current && s.current.remaining > 0)
        throw new StageProtocolError(
          `stage ${stage}: start of iteration ${msg.iteration} while iteration ${s.current.iteration} has ${s.current.remaining} tasks left`,
        );
      // Iterations start in order, each once: a replayed or forged start would strand the stage.
      const next = s.current ? s.current.iteration + 1 : s.setup.firstIteration;
      if (next !== undefined && msg.iteration !== next)
        throw new StageProtocolError(`stage ${stage}: start of iteration ${msg.iteration}, expected iteration ${next}`);
      startIteration(s, msg.iteration, now, fx);
      const replay = s.early.filter((m) => 'iteration' in m && m.iteration === msg.iteration);
      s.early = s.early.filter((m) => !('iteration' in m && m.iteration === msg.iteration));
      // Early arrivals were checked as they came (shape, iteration, no duplicate): they count as they are.
      for (const m of replay) if (m.type === 'input' || m.type === 'grad') arrive(s, s.current!, m.type, m.mb, m.chunk);
      break;
    }
    case 'input':
    case 'grad': {
      checkInShape(s, msg.type, msg.mb, msg.chunk);
      if (!s.current || msg.iteration !== s.current.iteration) {
        if (s.current && msg.iteration < s.current.iteration)
          throw new StageProtocolError(
            `stage ${stage}: ${msg.type} for finished iteration ${msg.iteration} (current ${s.current.iteration})`,
          );
        // Peers run at most one iteration ahead (the next starts once every stage has reported),
        // and before this stage's first start only that first iteration can have begun.
        if (s.current && msg.iteration > s.current.iteration + 1)
          throw new StageProtocolError(
            `stage ${stage}: ${msg.type} for iteration ${msg.iteration}, more than one ahead of the current ${s.current.iteration}`,
          );
        const first = s.setup.firstIteration ?? (s.early[0] as { iteration?: number } | undefined)?.iteration;
        if (!s.current && first !== undefined && msg.iteration !== first)
          throw new StageProtocolError(
            `stage ${stage}: ${msg.type} for iteration ${msg.iteration} before the first, ${first}, has started`,
          );
        // A duplicate is refused now, before the stage records its receipt or takes its tensors
        // (and so what waits is at most one iteration's worth).
        if (
          s.early.some(
            (m) => m.type === msg.type && m.iteration === msg.iteration && m.mb === msg.mb && m.chunk === msg.chunk,
          )
        )
          throw new StageProtocolError(
            `stage ${stage}: duplicate ${msg.type} for ${msg.type === 'input' ? 'F' : 'B'}${msg.mb} of iteration ${msg.iteration} before its start`,
          );
        s.early.push(msg);
        return fx;
      }
      arrive(s, s.current, msg.type, msg.mb, msg.chunk);
      break;
    }
    case 'arbitrate':
      break;
    case 'done': {
      const r = s.running;
      if (
        !r ||
        r.iteration !== msg.iteration ||
        r.task.kind !== msg.task.kind ||
        r.task.mb !== msg.task.mb ||
        r.task.chunk !== msg.task.chunk
      )
        throw new StageProtocolError(
          `stage ${stage}: completion of ${formatTask(msg.task)} (iteration ${msg.iteration}) but running ${r ? formatTask(r.task) : 'nothing'}`,
        );
      s.running = null;
      complete(s, s.current!, msg.task, now, fx);
      break;
    }
  }
  if (!s.setup.settleBeforeArbitration) arbitrate(s, now, fx);
  else if (msg.type === 'arbitrate') {
    s.arbitrationAsked = false;
    arbitrate(s, now, fx);
  } else if (!s.arbitrationAsked && s.current && !s.running && s.current.remaining > 0) {
    s.arbitrationAsked = true;
    fx.push({ type: 'arbitrate-later' });
  }
  return fx;
}
