// The stage actor: a mailbox around stageStep (stage-logic.ts) that performs its
// effects — starts compute, hands finished outputs to the sender mailbox, reports the
// end of an iteration, and emits events. The arbiter is this actor's behavior.

import { ActorRuntime, ActorRef } from './runtime';
import { StageCompute } from './compute';
import { EventSink } from './events';
import { StageMsg, StageProtocolError, StageSetup, StageState, StageStatus, initialStageState, stageStatus, stageStep } from './stage-logic';
import { SenderMsg } from './sender';

export type StageActorMsg = StageMsg | { readonly type: 'status'; readonly reply: (s: StageStatus) => void };

export interface StageWiring {
  readonly runtime: ActorRuntime;
  readonly compute: StageCompute;
  readonly sender: ActorRef<SenderMsg>;
  readonly sink: EventSink;
}

export function spawnStage(setup: StageSetup, w: StageWiring): ActorRef<StageActorMsg> {
  const { runtime, compute, sender, sink } = w;
  const clock = runtime.clock;
  return runtime.spawn<StageState, StageActorMsg>(`stage-${setup.stage}`, initialStageState(setup), (state, msg, self) => {
    if (msg.type === 'status') {
      msg.reply(stageStatus(state));
      return state;
    }
    let effects;
    try {
      effects = stageStep(state, msg, clock.now());
    } catch (err) {
      if (!(err instanceof StageProtocolError)) throw err;
      sink({ type: 'reject', t: clock.now(), stage: setup.stage, iteration: 'iteration' in msg ? msg.iteration : -1, reason: 'protocol', detail: err.message });
      return state;
    }
    for (const fx of effects) {
      switch (fx.type) {
        case 'run':
          compute.run(fx.iteration, fx.task, () => runtime.send(self, { type: 'done', iteration: fx.iteration, task: fx.task }));
          break;
        case 'send':
          runtime.send(sender, { type: 'output', iteration: fx.iteration, task: fx.task, kind: fx.kind, dst: fx.dst, dstChunk: fx.dstChunk });
          break;
        case 'finished':
          runtime.send(sender, { type: 'report', iteration: fx.iteration, peakInflight: fx.peakInflight });
          break;
        case 'event':
          sink(fx.event);
          break;
      }
    }
    return state;
  });
}
