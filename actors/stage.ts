// The stage actor: a mailbox around stageStep (stage-logic.ts) that performs its
// effects — starts compute, hands finished outputs to the sender mailbox, runs the
// end-of-iteration step of real compute, reports the end of an iteration, and emits
// events. The arbiter is this actor's behavior.

import { Task, formatTask } from '../policies/task';
import { TensorPayload } from '../transport/envelope';
import { ActorRuntime, ActorRef } from './runtime';
import { ArrivalRefusedError, StageCompute } from '../stage/compute';
import { EventSink } from '../stage/events';
import { stageStep } from '../stage/stage-logic';
import {
  StageEffect,
  StageMsg,
  StageProtocolError,
  StageSetup,
  StageState,
  StageStatus,
  initialStageState,
  stageStatus,
} from '../stage/stage-state';
import { SenderMsg } from './sender';
import { TpGroupMsg } from './tp-group';
import { enterTask, leaveTask } from '../base/task-activity';

export type StageActorMsg = StageMsg | { readonly type: 'status'; readonly reply: (s: StageStatus) => void };

export interface StageWiring {
  readonly runtime: ActorRuntime;
  readonly compute: StageCompute;
  readonly sender: ActorRef<SenderMsg>;
  readonly sink: EventSink;
  /** Resolves once what this process has published has left it (the bus's written()). */
  readonly outboundWritten?: () => Promise<void>;
  /** The rank's member of its tensor-parallel group (T > 1): proposals go there. */
  readonly tp?: ActorRef<TpGroupMsg>;
  /** The actor's name (default stage-<stage>; a wide job's names carry rank and replica). */
  readonly name?: string;
}

interface StageActorState {
  logic: StageState;
  /** Tensors a finished task produced, until its send effect takes them. */
  outputs: Map<string, readonly TensorPayload[]>;
}

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

// A blocking compute holds this process's event loop for the whole task: the socket
// writes of what the previous task produced, and the reads of what arrived meanwhile.
// So the task starts one turn later, after the sender mailbox's publish (its turn was
// queued by the send effect), once the bus has written that out: the peer gets its
// input now, not after this task. And its `done` is told two turns later, once what
// arrived during the task has passed the receiver into this stage's ready buffers,
// so the next pick sees it (a B that arrived during an F is not passed over).
function startTask(
  w: StageWiring,
  stage: number,
  iteration: number,
  task: Task,
  self: ActorRef<StageActorMsg>,
  startedAt: number,
): void {
  const { runtime, compute } = w;
  const done = (tensors?: readonly TensorPayload[], loss?: number) =>
    runtime.send(self, { type: 'done', iteration, task, tensors, loss });
  if (!compute.blocking) {
    compute.run(iteration, task, done, startedAt);
    return;
  }
  runtime
    .hold(nextTurn().then(() => w.outboundWritten?.()))
    .then(() => {
      // Marked, so a heartbeat thread reports this process busy, not hung, while the task holds its loop.
      enterTask();
      try {
        compute.run(iteration, task, (tensors, loss) => {
          leaveTask();
          void runtime.hold(nextTurn().then(nextTurn)).then(() => done(tensors, loss));
        });
      } finally {
        leaveTask();
      }
    })
    .catch((err) => runtime.fail(`stage-${stage}`, err));
}

/** Perform one effect other than 'finished' (which awaits the compute's end of iteration); runs are collected in `runs`. */
function performEffect(
  w: StageWiring,
  state: StageActorState,
  fx: Exclude<StageEffect, { type: 'finished' }>,
  self: ActorRef<StageActorMsg>,
  runs: { iteration: number; task: Task }[],
): void {
  const { runtime, compute, sender, sink } = w;
  switch (fx.type) {
    case 'run':
      runs.push(fx);
      break;
    case 'local': {
      // Output for this same stage's next chunk (P = 1 with interleaving): no message.
      const k = `${fx.iteration}|${formatTask(fx.task)}`;
      const tensors = state.outputs.get(k);
      state.outputs.delete(k);
      if (tensors && compute.accept) compute.accept(fx.iteration, fx.kind, fx.task.mb, fx.dstChunk, tensors);
      break;
    }
    case 'send': {
      const k = `${fx.iteration}|${formatTask(fx.task)}`;
      const tensors = state.outputs.get(k);
      state.outputs.delete(k);
      runtime.send(sender, {
        type: 'output',
        iteration: fx.iteration,
        task: fx.task,
        kind: fx.kind,
        dst: fx.dst,
        dstChunk: fx.dstChunk,
        tensors,
      });
      break;
    }
    case 'event':
      sink(fx.event);
      break;
    case 'propose':
      if (!w.tp) throw new Error(`${w.name ?? 'stage'}: a tensor-parallel proposal without a group`);
      runtime.send(w.tp, { type: 'propose', round: fx.round, iteration: fx.iteration, task: fx.task });
      break;
    case 'arbitrate-later':
      // A 0 ms timer fires once the virtual clock is quiet at this instant.
      runtime.clock.setTimer(0, () => runtime.send(self, { type: 'arbitrate' }));
      break;
  }
}

export function spawnStage(setup: StageSetup, w: StageWiring): ActorRef<StageActorMsg> {
  const { runtime, compute, sender, sink } = w;
  const clock = runtime.clock;
  const reject = (iteration: number, err: Error) =>
    sink({ type: 'reject', t: clock.now(), stage: setup.stage, iteration, reason: 'protocol', detail: err.message });
  const initial: StageActorState = { logic: initialStageState(setup), outputs: new Map() };
  // Every message the stage handles is work (taking an arrival's tensors, an end of
  // iteration): a loop held by it is busy, not hung (base/task-activity.ts).
  return runtime.spawn<StageActorState, StageActorMsg>(
    w.name ?? `stage-${setup.stage}`,
    initial,
    async (state, msg, self) => {
      enterTask();
      try {
        return await stageHandle(state, msg, self);
      } finally {
        leaveTask();
      }
    },
  );
  async function stageHandle(
    state: StageActorState,
    msg: StageActorMsg,
    self: ActorRef<StageActorMsg>,
  ): Promise<StageActorState> {
    if (msg.type === 'status') {
      msg.reply(stageStatus(state.logic));
      return state;
    }
    const iteration = 'iteration' in msg ? msg.iteration : (state.logic.current?.iteration ?? -1);
    const now = clock.now();
    const arrival = msg.type === 'input' || msg.type === 'grad' ? msg : null;
    let effects;
    try {
      // Checked before stageStep counts the arrival: a bad message leaves the stage as it was.
      if (arrival && compute.checkArrival)
        compute.checkArrival(arrival.type, arrival.mb, arrival.chunk, arrival.tensors ?? []);
      effects = stageStep(state.logic, msg, now);
    } catch (err) {
      if (!(err instanceof StageProtocolError || err instanceof ArrivalRefusedError)) throw err;
      reject(iteration, err as Error);
      return state;
    }
    // The run's record shows the arrivals the stage took, not the ones it refused.
    if (arrival?.receipt) sink(arrival.receipt);
    if (arrival && arrival.tensors && compute.accept)
      compute.accept(iteration, arrival.type, arrival.mb, arrival.chunk, arrival.tensors);
    if (msg.type === 'done' && msg.tensors && msg.tensors.length > 0)
      state.outputs.set(`${msg.iteration}|${formatTask(msg.task)}`, msg.tensors);
    const runs: { iteration: number; task: Task }[] = [];
    for (const fx of effects) {
      if (fx.type === 'finished') {
        const end = compute.endIteration?.bind(compute);
        const body = end ? await (enterTask(), end(fx.iteration).finally(leaveTask)) : {};
        runtime.send(sender, { type: 'report', iteration: fx.iteration, peakInflight: fx.peakInflight, body });
      } else performEffect(w, state, fx, self, runs);
    }
    for (const r of runs) startTask(w, setup.stage, r.iteration, r.task, self, now);
    return state;
  }
}
