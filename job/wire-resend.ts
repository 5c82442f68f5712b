// The resend path and the injected faults of one stage's wiring (job/wire-stage.ts):
// lost activations and gradients are asked for again (actors/resend.ts).

import { RESEND_DEFAULTS } from './defaults';
import { Bus, Subscription } from '../transport/bus';
import { FaultBus } from '../transport/fault-bus';
import { FaultSpec, injectsFaults, losesMessages } from '../transport/fault-spec';
import { parseSubject } from '../transport/subjects';
import { isWide } from '../transport/lanes';
import { resendPeers, serveResends, watchForLost } from '../actors/resend';
import { ActorRef } from '../actors/runtime';
import { SenderMsg } from '../actors/sender';
import { ReceiverMsg } from '../actors/receiver';
import { StageActorMsg } from '../actors/stage';
import { EventSink } from '../stage/events';
import type { StageWiringOptions } from './wire-stage';

/**
 * Whether the stage keeps what it sends and asks for what it lost: a plain synchronous
 * stage whose messages can go missing (injected drops; NATS, where a reconnect loses what
 * was in flight). Asynchronous mode has one endless iteration, whose messages it cannot keep.
 */
function resendsOn(o: StageWiringOptions): boolean {
  const { cfg, bus, runtime } = o;
  if (cfg.mode !== 'sync' || isWide(o.lane) || o.plan.shape.stages < 2) return false;
  return losesMessages(cfg.faults) || (bus.kind === 'nats' && runtime.clock.kind === 'real');
}

/** The bus the stage's sender publishes on, with the job's faults on its activations and gradients. */
function faultyBus(o: StageWiringOptions, faults: FaultSpec): Bus {
  const spec = { ...faults, seed: faults.seed + o.stage };
  return new FaultBus(o.bus, spec, o.runtime.clock, (subj) => {
    const kind = parseSubject(subj)?.kind;
    return kind === 'activation' || kind === 'gradient';
  });
}

/** The sender's bus (with the job's faults) and resend settings, and the receiver's, of a stage. */
export function resendWiring(o: StageWiringOptions) {
  const { cfg, bus } = o;
  const on = resendsOn(o);
  const peers = resendPeers(o.stage, o.plan.shape.stages);
  return {
    on,
    sender: {
      bus: injectsFaults(cfg.faults) ? faultyBus(o, cfg.faults) : bus,
      keepForResend: on ? { afterMs: RESEND_DEFAULTS.afterMs } : undefined,
    },
    receiver: { resend: on ? { bus, job: cfg.job, stage: o.stage, launch: o.launch, peers } : undefined },
  };
}

/** Serve the peers' resend requests to this stage's sender, and watch the stage for lost arrivals. */
export function wireResends(
  o: StageWiringOptions,
  sender: ActorRef<SenderMsg>,
  stage: ActorRef<StageActorMsg>,
  receiver: ActorRef<ReceiverMsg>,
  sink: EventSink,
): Subscription {
  const { runtime, bus, cfg } = o;
  const stages = o.plan.shape.stages;
  const s = o.stage;
  watchForLost({
    runtime,
    stage,
    ask: (iteration) => runtime.send(receiver, { type: 'ask-resend', iteration }),
    everyMs: RESEND_DEFAULTS.afterMs,
    lastIteration: cfg.firstIteration + cfg.warmupIterations + cfg.iterations - 1,
  });
  return serveResends({ runtime, bus, job: cfg.job, stage: s, stages, launch: o.launch, sender, sink });
}
