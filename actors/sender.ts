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
import { encodeEnvelope, encodeEnvelopeParts } from '../transport/codec';
import { Bus } from '../transport/bus';
import { ENVELOPE_VERSION, Envelope, TensorPayload, launchField } from '../transport/envelope';
import { subject } from '../transport/subjects';
import { Lane, isWide, laneName, laneSubject } from '../transport/lanes';
import { ActorRef, ActorRuntime } from './runtime';
import { EventSink } from '../stage/events';

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
}

interface SenderState {
  seq: number;
}

export function spawnSender(w: SenderWiring): ActorRef<SenderMsg> {
  const { runtime, bus, job, stage, comm, sink } = w;
  const clock = runtime.clock;
  const launch = launchField(w.launch);
  const where = isWide(w.lane) ? { rank: w.lane.rank, replica: w.lane.replica } : {};
  return runtime.spawn<SenderState, SenderMsg>(`sender-${laneName(stage, w.lane)}`, { seq: 0 }, (state, msg) => {
    const now = clock.now();
    const seq = state.seq++;
    if (msg.type === 'report') {
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
        body: { peakInflight: msg.peakInflight, ...(msg.body ?? {}), ...where },
        ...launch,
      });
      bus.publish(subject(job, 'report'), data);
      return state;
    }
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
    // A bus that takes parts copies the tensors once, into the transport, instead of twice.
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
      ...(clock.kind === 'real' ? { cpuMs: performance.now() - c0 } : {}),
    });
    // A refused publish (e.g. a tensor over the server's max_payload) fails the job clearly.
    try {
      const to = laneSubject(job, msg.kind, msg.dst, w.lane);
      if (Array.isArray(data)) bus.publishParts?.(to, data);
      else bus.publish(to, data as Uint8Array);
    } catch (err) {
      runtime.fail(`sender-${stage}`, err);
    }
    return state;
  });
}
