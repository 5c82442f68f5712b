// The sender mailbox of a stage (RRFP §4.1: send threads). It takes finished outputs
// from the stage, draws each one's communication time (latency + bytes/bandwidth, with
// the profile's jitter — this is where communication jitter is injected), stamps it on
// the envelope and publishes at once; the receiving mailbox holds the message until that
// time after the send (receiver.ts, commHoldMs). The hold is on the receiving side
// because a real compute task holds its process's event loop: a timer in the sender
// could only fire after the task, so the message would leave a whole task late, as a
// send thread never would. Sends are independent: a slow message never holds back the
// next one, so messages may overtake each other, as they do on a real network.

import { Task } from '../policies/task';
import { encodeEnvelope, encodeEnvelopeParts, encodeValue } from '../transport/codec';
import { Bus } from '../transport/bus';
import { ENVELOPE_VERSION, Envelope, TensorPayload, launchField } from '../transport/envelope';
import { subject } from '../transport/subjects';
import { Lane, isWide, laneName, laneSubject } from '../transport/lanes';
import { ActorRef, ActorRuntime } from './runtime';
import { EventSink } from '../stage/events';
import { arrivalKey } from './resend';

export type SenderMsg =
  | {
      readonly type: 'output';
      readonly iteration: number;
      readonly task: Task;
      readonly kind: 'activation' | 'gradient';
      readonly dst: number;
      readonly dstChunk: number;
      readonly tensors?: readonly TensorPayload[];
    }
  | {
      /** Publish again what this stage sent `dst` in `iteration` that `dst` has not had (`have`: arrivalKey). */
      readonly type: 'resend';
      readonly iteration: number;
      readonly dst: number;
      readonly have: ReadonlySet<string>;
    }
  | {
      readonly type: 'report';
      readonly iteration: number;
      readonly peakInflight: number;
      readonly body?: Record<string, unknown>;
    };

export interface CommModel {
  comm(iteration: number, stage: number, t: Task): number;
  messageBytes(stage: number, t: Task): number;
}

export interface SenderWiring {
  readonly runtime: ActorRuntime;
  readonly bus: Bus;
  readonly job: string;
  readonly stage: number;
  readonly comm: CommModel;
  readonly sink: EventSink;
  /** The job's launch id, stamped on every message (absent on the in-process bus). */
  readonly launch?: string;
  /** The stage actor's rank and replica in a wide job: its outputs go to the same lane of the next stage. */
  readonly lane?: Lane;
  /** Keep what is published for resends (a receiver asks for what it lost: actors/resend.ts), sent again once `afterMs` old. */
  readonly keepForResend?: { readonly afterMs: number };
}

/** A message as it was published, kept for a resend until its iteration is two behind. */
interface Kept {
  readonly dst: number;
  readonly key: string;
  readonly subject: string;
  /** Its bytes, or their parts for a bus that takes parts (the tensors' own arrays, not copies). */
  readonly data: Uint8Array | Uint8Array[];
  readonly mb: number;
  readonly chunk: number;
  readonly kind: string;
  readonly seq: number;
  readonly bytes: number;
  /** When it was published (sender's clock). */
  readonly at: number;
}

interface SenderState {
  seq: number;
  /** What was published per iteration (only when `keepForResend`). */
  kept: Map<number, Kept[]>;
}

function keep(state: SenderState, iteration: number, k: Kept): void {
  let list = state.kept.get(iteration);
  if (!list) {
    state.kept.set(iteration, (list = []));
    // A sync stage's peers run at most one iteration ahead of it: older ones are done with.
    for (const it of state.kept.keys()) if (it < iteration - 1) state.kept.delete(it);
  }
  list.push(k);
}

/** Publish again what `dst` lacks of what this sender kept for it, each with a resend event. */
function resend(w: SenderWiring, state: SenderState, msg: Extract<SenderMsg, { type: 'resend' }>): void {
  const now = w.runtime.clock.now();
  for (const k of state.kept.get(msg.iteration) ?? []) {
    // One younger than a receiver's wait may still be on its way (read after the receiver's timer fired).
    if (k.dst !== msg.dst || msg.have.has(k.key) || now - k.at < (w.keepForResend?.afterMs ?? 0)) continue;
    w.sink({
      type: 'resend',
      t: now,
      stage: w.stage,
      iteration: msg.iteration,
      kind: k.kind,
      mb: k.mb,
      chunk: k.chunk,
      dst: k.dst,
      seq: k.seq,
      bytes: k.bytes,
    });
    try {
      publishData(w.bus, k.subject, k.data);
    } catch (err) {
      w.runtime.fail(`sender-${w.stage}`, err);
    }
  }
}

/** A bus that takes parts copies the tensors once, into the transport, instead of twice. */
function publishData(bus: Bus, to: string, data: Uint8Array | Uint8Array[]): void {
  if (Array.isArray(data) && bus.publishParts) bus.publishParts(to, data);
  else bus.publish(to, data as Uint8Array);
}

/** A finished output on its way: encoded, published, told as a send event, kept for resends when asked. */
function publishOutput(
  w: SenderWiring,
  state: SenderState,
  msg: Extract<SenderMsg, { type: 'output' }>,
  now: number,
  seq: number,
): void {
  const { runtime, bus, job, stage, comm, sink } = w;
  const launch = launchField(w.launch);
  const t = msg.task;
  const c0 = performance.now();
  const tensorBytes = (msg.tensors ?? []).reduce((n, x) => n + x.data.byteLength, 0);
  const bytes = tensorBytes > 0 ? tensorBytes : comm.messageBytes(stage, t);
  const commMs = comm.comm(msg.iteration, stage, t);
  const envelope: Envelope = {
    v: ENVELOPE_VERSION,
    job,
    kind: msg.kind,
    iteration: msg.iteration,
    mb: t.mb,
    chunk: msg.dstChunk,
    dir: msg.kind === 'activation' ? 'forward' : 'backward',
    src: stage,
    dst: msg.dst,
    seq,
    sentAt: now,
    ...(commMs > 0 ? { commMs } : {}),
    bytes,
    tensors: msg.tensors ?? [],
    ...launch,
  };
  const data = bus.publishParts ? encodeEnvelopeParts(envelope) : encodeEnvelope(envelope);
  sink({
    type: 'send',
    t: now,
    stage,
    iteration: msg.iteration,
    kind: msg.kind,
    mb: t.mb,
    chunk: msg.dstChunk,
    dst: msg.dst,
    seq,
    bytes,
    ...(runtime.clock.kind === 'real' ? { cpuMs: performance.now() - c0 } : {}),
  });
  const to = laneSubject(job, msg.kind, msg.dst, w.lane);
  if (w.keepForResend) {
    const key = arrivalKey(msg.kind, stage, t.mb, msg.dstChunk);
    keep(state, msg.iteration, {
      dst: msg.dst,
      key,
      subject: to,
      data,
      mb: t.mb,
      chunk: msg.dstChunk,
      kind: msg.kind,
      seq,
      bytes,
      at: now,
    });
  }
  // A refused publish (e.g. a tensor over the server's max_payload) fails the job clearly.
  try {
    publishData(bus, to, data);
  } catch (err) {
    runtime.fail(`sender-${stage}`, err);
  }
}

/** An iteration's report, and after it (when the job recovers) the stage's state, apart: the coordinator does not wait for it. */
function publishReport(w: SenderWiring, msg: Extract<SenderMsg, { type: 'report' }>, now: number, seq: number): void {
  const { bus, job, stage } = w;
  const launch = launchField(w.launch);
  const where = isWide(w.lane) ? { rank: w.lane.rank, replica: w.lane.replica } : {};
  const { state: kept, ...body } = msg.body ?? {};
  const data = encodeEnvelope({
    v: ENVELOPE_VERSION,
    job,
    kind: 'report',
    iteration: msg.iteration,
    mb: -1,
    chunk: -1,
    dir: 'control',
    src: stage,
    dst: -1,
    seq,
    sentAt: now,
    bytes: 0,
    tensors: [],
    body: { peakInflight: msg.peakInflight, ...body, ...where },
    ...launch,
  });
  bus.publish(subject(job, 'report'), data);
  if (kept !== undefined)
    bus.publish(
      subject(job, 'state', stage),
      encodeValue({ verb: 'state', job, stage, iteration: msg.iteration, snapshot: kept, ...launch }),
    );
}

export function spawnSender(w: SenderWiring): ActorRef<SenderMsg> {
  const { runtime, stage } = w;
  const clock = runtime.clock;
  return runtime.spawn<SenderState, SenderMsg>(
    `sender-${laneName(stage, w.lane)}`,
    { seq: 0, kept: new Map() },
    (state, msg) => {
      if (msg.type === 'resend') {
        resend(w, state, msg);
        return state;
      }
      const now = clock.now();
      const seq = state.seq++;
      if (msg.type === 'report') publishReport(w, msg, now, seq);
      else publishOutput(w, state, msg, now, seq);
      return state;
    },
  );
}
