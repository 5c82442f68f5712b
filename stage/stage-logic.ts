// The stage's logic as a pure transition: step(state, message, now) -> effects.
// It owns readiness (RRFP appendix C.1 buffers, kept by readiness.ts; the state and its
// types are stage-state.ts) and the arbiter behavior; the stage actor performs the
// effects (compute, sends, reports). No clock, bus or tfjs here.
//
// Buffers per iteration: forward-ready = inputs that arrived (the data at the first
// virtual stage) and whose F has not run; forward-finished and backward-finished live
// in the sender mailbox until the send completes; backward-ready = gradients that
// arrived. A forward input is retained (counted in `inflight`) from F until its B
// completes (its W when backward is split), which is what backpressure bounds.

import { Task, formatTask, task, taskProblem } from '../policies/task';
import { closeRound, mayPropose, needsAgreement, notePeerRound, openRound } from './tp-coordination';
import { quoteValue } from '../base/quote';
import { arrive, checkInShape, complete, contextOf, startIteration } from './readiness';
import { PolicyError, StageEffect, StageMsg, StageProtocolError, StageState } from './stage-state';
import { adoptSwaps, noteDispatched, receiveSwap, swapsAtBoundary } from './policy-swap';

function arbitrate(s: StageState, now: number, fx: StageEffect[]): void {
  const it = s.current;
  if (!it || s.running || it.remaining === 0) return;
  if (s.tp && s.tp.proposing) return; // a tensor-parallel round is open: its answer decides
  if (s.policy.pending.length > 0) adoptSwaps(s, { at: 'arbitration' }, now, fx);
  const { stage } = s.setup;
  const arbiter = s.policy.arbiter;
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
  if (s.tp && needsAgreement(pick, s.setup.tp)) {
    if (!mayPropose(s.tp)) {
      // Deferred, nothing changed since. A ready W needs no agreement and is what can still
      // differ between the ranks (it frees in-flight room when backward is split): run it.
      const w = it.ready.W[0];
      if (w) dispatch(s, w, backpressure, now, fx);
      return;
    }
    closeIdle(s, now, fx);
    fx.push({
      type: 'propose',
      round: openRound(s.tp, it.iteration, pick, now, backpressure),
      iteration: it.iteration,
      task: pick,
    });
    return;
  }
  dispatch(s, pick, backpressure, now, fx);
}

/** End the stage's open wait (if any) with its wait event; a deferral's is recorded even at 0 ms (it is counted). */
function closeIdle(s: StageState, now: number, fx: StageEffect[]): void {
  const it = s.current!;
  if (it.idleSince === null) return;
  const ms = now - it.idleSince;
  if (ms > 0 || it.idleReason === 'tp-defer')
    fx.push({
      type: 'event',
      event: {
        type: 'wait',
        t: it.idleSince,
        stage: s.setup.stage,
        iteration: it.iteration,
        ms,
        reason: it.idleReason,
      },
    });
  it.idleSince = null;
}

/** Run `pick`: out of the ready set, the policy's memory advanced, task-start and run emitted. */
function dispatch(s: StageState, pick: Task, backpressure: boolean, now: number, fx: StageEffect[]): void {
  const it = s.current!;
  const { stage } = s.setup;
  const arbiter = s.policy.arbiter;
  it.ready.remove(pick);
  it.memo = arbiter.advance(it.memo, pick, contextOf(s, it));
  noteDispatched(s, pick);
  if (pick.kind === 'F') {
    s.inflight++;
    if (s.inflight > s.peakInflight) s.peakInflight = s.inflight;
  }
  closeIdle(s, now, fx);
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

/**
 * The group answered the open round: run the agreed task, or wait deferred. The round's time
 * is two waits: tp-peer until the last peer proposal reached this rank (`peersIn`; none when
 * the peers had proposed first), then tp-coord, the all-gather's own time (RRFP §7.4's TP Coord).
 */
function onTpResult(s: StageState, msg: MsgOf<'tp-result'>, now: number, fx: StageEffect[]): void {
  const tp = s.tp;
  const open = tp?.proposing;
  if (!tp || !open || !s.current || open.iteration !== s.current.iteration)
    throw new StageProtocolError(
      `stage ${s.setup.stage}: tensor-parallel answer for round ${msg.round} with no round open`,
    );
  const it = s.current;
  const agreed = closeRound(tp, msg.round, msg.candidates);
  const peersIn = Math.min(now, Math.max(open.at, msg.peersIn));
  const wait = (t: number, ms: number, reason: 'tp-peer' | 'tp-coord') =>
    fx.push({ type: 'event', event: { type: 'wait', t, stage: s.setup.stage, iteration: it.iteration, ms, reason } });
  if (peersIn > open.at) wait(open.at, peersIn - open.at, 'tp-peer');
  wait(peersIn, now - peersIn, 'tp-coord');
  if (agreed) {
    dispatch(s, agreed, open.backpressure, now, fx);
  } else {
    it.idleSince = now;
    it.idleReason = 'tp-defer';
  }
}

type MsgOf<T extends StageMsg['type']> = Extract<StageMsg, { type: T }>;

function onStart(s: StageState, msg: MsgOf<'start'>, now: number, fx: StageEffect[]): void {
  const { stage } = s.setup;
  if (s.current && s.current.remaining > 0)
    throw new StageProtocolError(
      `stage ${stage}: start of iteration ${msg.iteration} while iteration ${s.current.iteration} has ${s.current.remaining} tasks left`,
    );
  // Iterations start in order, each once: a replayed or forged start would strand the stage.
  const next = s.current ? s.current.iteration + 1 : s.setup.firstIteration;
  if (next !== undefined && msg.iteration !== next)
    throw new StageProtocolError(`stage ${stage}: start of iteration ${msg.iteration}, expected iteration ${next}`);
  swapsAtBoundary(s, msg.iteration, now, fx);
  startIteration(s, msg.iteration, now, fx);
  const replay = s.early.filter((m) => 'iteration' in m && m.iteration === msg.iteration);
  s.early = s.early.filter((m) => !('iteration' in m && m.iteration === msg.iteration));
  // Early arrivals were checked as they came (shape, iteration, no duplicate): they count as they are.
  for (const m of replay) if (m.type === 'input' || m.type === 'grad') arrive(s, s.current!, m.type, m.mb, m.chunk);
}

/** Count an input or gradient; one for an iteration not started yet is held (returns false: nothing to arbitrate). */
function onArrival(s: StageState, msg: MsgOf<'input' | 'grad'>): boolean {
  const { stage } = s.setup;
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
    return false;
  }
  arrive(s, s.current, msg.type, msg.mb, msg.chunk);
  return true;
}

function onDone(s: StageState, msg: MsgOf<'done'>, now: number, fx: StageEffect[]): void {
  const r = s.running;
  if (
    !r ||
    r.iteration !== msg.iteration ||
    r.task.kind !== msg.task.kind ||
    r.task.mb !== msg.task.mb ||
    r.task.chunk !== msg.task.chunk
  )
    throw new StageProtocolError(
      `stage ${s.setup.stage}: completion of ${formatTask(msg.task)} (iteration ${msg.iteration}) but running ${r ? formatTask(r.task) : 'nothing'}`,
    );
  s.running = null;
  complete(s, s.current!, msg.task, now, fx, msg.loss);
}

/** The transition. Mutates `s` in place (it is owned by one actor) and returns the effects. */
export function stageStep(s: StageState, msg: StageMsg, now: number): StageEffect[] {
  const fx: StageEffect[] = [];
  switch (msg.type) {
    case 'start':
      onStart(s, msg, now, fx);
      break;
    case 'input':
    case 'grad':
      if (!onArrival(s, msg)) return fx;
      break;
    case 'arbitrate':
      break;
    case 'swap':
      receiveSwap(s, msg.order, now, fx);
      break;
    case 'done':
      onDone(s, msg, now, fx);
      break;
    case 'tp-result':
      onTpResult(s, msg, now, fx);
      break;
    case 'tp-peer':
      if (s.tp) notePeerRound(s.tp, msg.round);
      break;
  }
  if (s.tp && (msg.type === 'input' || msg.type === 'grad' || msg.type === 'done' || msg.type === 'start'))
    s.tp.version++;
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
