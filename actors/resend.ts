// Recovery of lost stage-to-stage messages by resending (docs/operations.md, "Lost
// messages"). Each sender keeps what it published in the current and the previous
// iteration (sender.ts, keepForResend); each receiver notes which arrivals it has had
// (receiver.ts). A stage that has sat idle with work left for `everyMs` (watchForLost)
// has its receiver ask its neighbours, on baton.<job>.resend.<peer>, to publish again
// what they sent it in that iteration and it has not had; the request lists what it has.
// A resend that crosses the late original is a duplicate, which the stage refuses.
// Nothing changes the iteration: the stage computes on the same inputs in the same
// order of its own policy, so the result is the fault-free one.

import { Bus, Subscription } from '../transport/bus';
import { decodeEnvelope, encodeEnvelope } from '../transport/codec';
import { ENVELOPE_VERSION, launchField } from '../transport/envelope';
import { subject } from '../transport/subjects';
import { ActorRef, ActorRuntime } from './runtime';
import { EventSink } from '../stage/events';
import type { SenderMsg } from './sender';
import type { StageActorMsg } from './stage';
import type { StageStatus } from '../stage/stage-state';

/** What identifies one arrival of an iteration at its receiver. */
export function arrivalKey(kind: string, src: number, mb: number, chunk: number): string {
  return `${kind}|${src}|${mb}|${chunk}`;
}

/** Most arrival keys a request may list (a stage's arrivals of one iteration are far fewer). */
const MAX_HAVE = 1 << 17;

/** The stages a stage's inputs and gradients come from: its neighbours on the ring (interleaved chunks wrap). */
export function resendPeers(stage: number, stages: number): number[] {
  if (stages < 2) return [];
  return [...new Set([(stage + stages - 1) % stages, (stage + 1) % stages])];
}

export interface ResendAsk {
  readonly bus: Bus;
  readonly job: string;
  readonly stage: number;
  readonly launch?: string;
  readonly peers: readonly number[];
}

/** Ask each peer for what it sent `a.stage` in `iteration` that is not among `have`. */
export function askForResend(a: ResendAsk, iteration: number, have: ReadonlySet<string>, now: number): void {
  const list = [...have].slice(0, MAX_HAVE);
  for (const peer of a.peers)
    a.bus.publish(
      subject(a.job, 'resend', peer),
      encodeEnvelope({
        v: ENVELOPE_VERSION,
        job: a.job,
        kind: 'resend',
        iteration,
        mb: -1,
        chunk: -1,
        dir: 'control',
        src: a.stage,
        dst: peer,
        seq: 0,
        sentAt: now,
        bytes: 0,
        tensors: [],
        body: { have: list },
        ...launchField(a.launch),
      }),
    );
}

export interface ResendServe {
  readonly runtime: ActorRuntime;
  readonly bus: Bus;
  readonly job: string;
  readonly stage: number;
  readonly stages: number;
  readonly launch?: string;
  readonly sender: ActorRef<SenderMsg>;
  readonly sink: EventSink;
}

/** Why a resend request is refused, or null. */
function requestProblem(
  s: ResendServe,
  data: Uint8Array,
): { problem: string } | { dst: number; iteration: number; have: Set<string> } {
  let e;
  try {
    e = decodeEnvelope(data);
  } catch (err) {
    return { problem: (err as Error).message };
  }
  if (e.job !== s.job || e.kind !== 'resend' || e.dst !== s.stage)
    return { problem: 'not a resend request for this stage' };
  if (s.launch !== undefined && e.launch !== s.launch) return { problem: 'a resend request of another launch' };
  if (!Number.isSafeInteger(e.src) || e.src < 0 || e.src >= s.stages || e.src === s.stage)
    return { problem: `a resend request from stage ${e.src}` };
  const have = e.body?.have;
  if (!Array.isArray(have) || have.length > MAX_HAVE || !have.every((k) => typeof k === 'string' && k.length <= 64))
    return { problem: 'a resend request whose "have" is not a list of arrival keys' };
  return { dst: e.src, iteration: e.iteration, have: new Set(have as string[]) };
}

/** Take resend requests addressed to this stage's sender; a bad one is a counted rejection. */
export function serveResends(s: ResendServe): Subscription {
  return s.bus.subscribe(subject(s.job, 'resend', s.stage), (subj, data) => {
    try {
      const r = requestProblem(s, data);
      if ('problem' in r)
        s.sink({
          type: 'reject',
          t: s.runtime.clock.now(),
          stage: s.stage,
          iteration: -1,
          reason: 'bad-resend',
          detail: `${subj}: ${r.problem}`,
        });
      else s.runtime.send(s.sender, { type: 'resend', iteration: r.iteration, dst: r.dst, have: r.have });
    } catch {
      // Never out of a bus callback; a request that cannot be served is one the receiver repeats.
    }
  });
}

export interface LostWatch {
  readonly runtime: ActorRuntime;
  readonly stage: ActorRef<StageActorMsg>;
  /** Told the iteration whose arrivals the stage has waited for too long. */
  readonly ask: (iteration: number) => void;
  readonly everyMs: number;
  /** The job's last iteration: once it is done the watch ends. */
  readonly lastIteration: number;
}

/** Every `everyMs`, ask for resends if the stage has sat idle that long with work left in its iteration. */
export function watchForLost(w: LostWatch): void {
  const clock = w.runtime.clock;
  const check = (st: StageStatus) => {
    if (st.iteration === w.lastIteration && st.remaining === 0) return;
    const now = clock.now();
    if (st.iteration !== null && st.remaining > 0 && st.running === null && st.idleSince !== null)
      if (now - st.idleSince >= w.everyMs) w.ask(st.iteration);
    clock.setTimer(w.everyMs, tick);
  };
  const tick = () => w.runtime.send(w.stage, { type: 'status', reply: check });
  clock.setTimer(w.everyMs, tick);
}
