// The receiver mailbox of a stage (RRFP §4.1: receive threads). Bus deliveries land
// here as bytes; the receiver decodes and validates them, routes each by microbatch
// and direction into the stage's ready buffers, and counts and logs what it rejects.
// Nothing a peer sends can make it throw: a bad message is an event, not a crash.
// An activation or gradient reaches the stage the communication time its sender drew
// (`commMs`, see sender.ts) after it was sent: the receiver holds it for what is left of
// that time (commHoldMs).

import { decodeEnvelope, CodecError } from '../transport/codec';
import { quoteValue } from '../base/quote';
import { Envelope, launchText } from '../transport/envelope';
import { ActorRef, ActorRuntime } from './runtime';
import { Clock } from '../base/clock';
import { EventSink, ReceiveEvent } from '../stage/events';
import { StageActorMsg } from './stage';
import { Lane, laneName } from '../transport/lanes';
import { SwapOrder } from '../stage/policy-swap';
import { ResendAsk, arrivalKey, askForResend } from './resend';

export type ReceiverMsg =
  | { readonly type: 'bytes'; readonly subject: string; readonly data: Uint8Array }
  /** The stage has waited too long in `iteration`: ask its peers for what did not come (actors/resend.ts). */
  | { readonly type: 'ask-resend'; readonly iteration: number };

export interface ReceiverWiring {
  readonly runtime: ActorRuntime;
  readonly job: string;
  readonly stage: number;
  readonly target: ActorRef<StageActorMsg>;
  readonly sink: EventSink;
  /** The job's launch id: a message of another launch is refused (absent: none is checked). */
  readonly launch?: string;
  /** The stage actor's rank and replica in a wide job (names the actor). */
  readonly lane?: Lane;
  /** A policy swap's control body as an order for the stage, or why it is refused (absent: swaps are refused). */
  readonly swapOrder?: (body: Readonly<Record<string, unknown>> | undefined) => SwapOrder | string | null;
  /** Note arrivals and ask peers for lost ones (absent: no resends). */
  readonly resend?: ResendAsk;
}

export interface ReceiverState {
  received: number;
  bytes: number;
  rejected: number;
  /** Arrival keys (resend.ts) per iteration, the current and the one before, when resends are on. */
  have: Map<number, Set<string>>;
  /** Arrivals dropped as already had (resends on): a resend or a duplicate of a sender that went on. */
  duplicates: number;
}

/** Note an arrival; false when it is one already had (a resend that crossed its late original): then it is dropped. */
function noteArrival(state: ReceiverState, e: Envelope): boolean {
  let set = state.have.get(e.iteration);
  if (!set) {
    state.have.set(e.iteration, (set = new Set()));
    for (const it of state.have.keys()) if (it < e.iteration - 1) state.have.delete(it);
  }
  const key = arrivalKey(e.kind, e.src, e.mb, e.chunk);
  if (set.has(key)) {
    state.duplicates++;
    return false;
  }
  set.add(key);
  return true;
}

/**
 * How long a message that arrives at `now` is held: the rest of its drawn time, counted
 * from its send. Time already spent in transit counts; a message that waited in the
 * socket while a blocking compute task held this process is not held again after it.
 * `sentAt` is the sender's clock: the same clock on one machine (and in the
 * simulation, where transit takes no time and the hold is all of commMs). Across
 * machines a clock offset can only shorten the hold to 0 or lengthen it to commMs.
 */
export function commHoldMs(sentAt: number, commMs: number, now: number): number {
  return Math.min(commMs, Math.max(0, sentAt + commMs - now));
}

/**
 * Runs `deliver` once what is left at `now` of `e`'s emulated communication time has passed
 * (at once when it has none).
 */
export function afterComm(
  clock: Pick<Clock, 'setTimer'>,
  e: Pick<Envelope, 'sentAt' | 'commMs'>,
  now: number,
  deliver: () => void,
): void {
  const hold = e.commMs !== undefined ? commHoldMs(e.sentAt, e.commMs, now) : 0;
  if (hold > 0) clock.setTimer(hold, deliver);
  else deliver();
}

type Reject = (now: number, reason: string, detail: string) => void;

/** Decode and check a delivery: the envelope if it is for this stage of this launch, else null (rejected). */
function acceptedEnvelope(
  w: ReceiverWiring,
  state: ReceiverState,
  msg: Extract<ReceiverMsg, { type: 'bytes' }>,
  now: number,
  reject: Reject,
): Envelope | null {
  const { job, stage } = w;
  let e: Envelope;
  try {
    e = decodeEnvelope(msg.data);
  } catch (err) {
    state.rejected++;
    reject(now, err instanceof CodecError ? err.reason : 'malformed', `${msg.subject}: ${(err as Error).message}`);
    return null;
  }
  if (e.job !== job || (e.dst !== stage && e.kind !== 'control')) {
    state.rejected++;
    reject(
      now,
      'misrouted',
      `${msg.subject}: message for job ${e.job} stage ${e.dst} reached job ${job} stage ${stage}`,
    );
    return null;
  }
  if (w.launch !== undefined && e.launch !== w.launch) {
    state.rejected++;
    reject(
      now,
      'other-launch',
      `${msg.subject}: message of launch ${launchText(e.launch)} of job ${job} (stage ${e.src}), this is launch ${w.launch}: left by an earlier run of the same job name, or by an attempt a replay replaced?`,
    );
    return null;
  }
  return e;
}

/** Hand an activation, gradient or data signal to the stage once its communication time is over. */
function deliverArrival(w: ReceiverWiring, env: Envelope, now: number, cpuMs: number | undefined): void {
  const { runtime, stage, target } = w;
  const clock = runtime.clock;
  const deliver = () => {
    const t = clock.now();
    // The stage records this receipt if it takes the message (a duplicate it refuses is a reject).
    const receipt: ReceiveEvent = {
      type: 'receive',
      t,
      stage,
      iteration: env.iteration,
      kind: env.kind,
      mb: env.mb,
      chunk: env.chunk,
      src: env.src,
      seq: env.seq,
      bytes: env.bytes,
      latency: t - env.sentAt,
      ...(cpuMs !== undefined ? { cpuMs } : {}),
    };
    runtime.send(target, {
      type: env.kind === 'gradient' ? 'grad' : 'input',
      iteration: env.iteration,
      mb: env.mb,
      chunk: env.chunk,
      tensors: env.tensors.length > 0 ? env.tensors : undefined,
      receipt,
    });
  };
  afterComm(clock, env, now, deliver);
}

export function spawnReceiver(w: ReceiverWiring): ActorRef<ReceiverMsg> {
  const { runtime, stage, target, sink } = w;
  const clock = runtime.clock;
  const reject: Reject = (now, reason, detail) =>
    sink({ type: 'reject', t: now, stage, iteration: -1, reason, detail });
  return runtime.spawn<ReceiverState, ReceiverMsg>(
    `receiver-${laneName(stage, w.lane)}`,
    { received: 0, bytes: 0, rejected: 0, have: new Map(), duplicates: 0 },
    (state, msg) => {
      const now = clock.now();
      if (msg.type === 'ask-resend') {
        if (w.resend) askForResend(w.resend, msg.iteration, state.have.get(msg.iteration) ?? new Set(), now);
        return state;
      }
      const c0 = performance.now();
      const e = acceptedEnvelope(w, state, msg, now, reject);
      if (e === null) return state;
      state.received++;
      state.bytes += e.bytes;
      switch (e.kind) {
        case 'control': {
          const verb = e.body?.verb;
          if (verb === 'start') runtime.send(target, { type: 'start', iteration: e.iteration });
          else if (verb === 'swap') {
            // null: taken by the stage's parameter store (a consistency swap).
            const order = w.swapOrder ? w.swapOrder(e.body) : 'this stage takes no policy swaps';
            if (order !== null && typeof order !== 'string') runtime.send(target, { type: 'swap', order });
            else if (typeof order === 'string') {
              state.rejected++;
              reject(now, 'bad-swap', `${msg.subject}: ${order}`);
            }
          } else {
            state.rejected++;
            reject(now, 'bad-field', `${msg.subject}: unknown control verb ${quoteValue(verb)}`);
          }
          return state;
        }
        case 'data':
        case 'activation':
        case 'gradient':
          if (w.resend && !noteArrival(state, e)) return state;
          deliverArrival(w, e, now, clock.kind === 'real' ? performance.now() - c0 : undefined);
          return state;
        default:
          state.rejected++;
          reject(now, 'bad-field', `${msg.subject}: unknown message kind ${quoteValue(e.kind)}`);
          return state;
      }
    },
  );
}
