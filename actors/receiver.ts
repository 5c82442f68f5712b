// The receiver mailbox of a stage (RRFP §4.1: receive threads). Bus deliveries land
// here as bytes; the receiver decodes and validates them, routes each by microbatch
// and direction into the stage's ready buffers, and counts and logs what it rejects.
// Nothing a peer sends can make it throw: a bad message is an event, not a crash.

import { decodeEnvelope, CodecError } from '../transport/codec';
import { Envelope } from '../transport/envelope';
import { ActorRef, ActorRuntime } from './runtime';
import { EventSink } from './events';
import { StageActorMsg } from './stage';

export type ReceiverMsg = { readonly type: 'bytes'; readonly subject: string; readonly data: Uint8Array };

export interface ReceiverWiring {
  readonly runtime: ActorRuntime;
  readonly job: string;
  readonly stage: number;
  readonly target: ActorRef<StageActorMsg>;
  readonly sink: EventSink;
}

export interface ReceiverState {
  received: number;
  bytes: number;
  rejected: number;
}

export function spawnReceiver(w: ReceiverWiring): ActorRef<ReceiverMsg> {
  const { runtime, job, stage, target, sink } = w;
  const clock = runtime.clock;
  const reject = (now: number, reason: string, detail: string) =>
    sink({ type: 'reject', t: now, stage, iteration: -1, reason, detail });
  return runtime.spawn<ReceiverState, ReceiverMsg>(`receiver-${stage}`, { received: 0, bytes: 0, rejected: 0 }, (state, msg) => {
    const now = clock.now();
    const c0 = performance.now();
    let e: Envelope;
    try {
      e = decodeEnvelope(msg.data);
    } catch (err) {
      state.rejected++;
      reject(now, err instanceof CodecError ? err.reason : 'malformed', `${msg.subject}: ${(err as Error).message}`);
      return state;
    }
    if (e.job !== job || (e.dst !== stage && e.kind !== 'control')) {
      state.rejected++;
      reject(now, 'misrouted', `${msg.subject}: message for job ${e.job} stage ${e.dst} reached job ${job} stage ${stage}`);
      return state;
    }
    state.received++;
    state.bytes += e.bytes;
    switch (e.kind) {
      case 'control': {
        const verb = e.body?.verb;
        if (verb === 'start') runtime.send(target, { type: 'start', iteration: e.iteration });
        else {
          state.rejected++;
          reject(now, 'bad-field', `${msg.subject}: unknown control verb ${JSON.stringify(verb)}`);
        }
        return state;
      }
      case 'data':
      case 'activation':
      case 'gradient':
        sink({ type: 'receive', t: now, stage, iteration: e.iteration, kind: e.kind, mb: e.mb, chunk: e.chunk, src: e.src, seq: e.seq, bytes: e.bytes, latency: now - e.sentAt, ...(clock.kind === 'real' ? { cpuMs: performance.now() - c0 } : {}) });
        runtime.send(target, { type: e.kind === 'gradient' ? 'grad' : 'input', iteration: e.iteration, mb: e.mb, chunk: e.chunk, tensors: e.tensors.length > 0 ? e.tensors : undefined });
        return state;
      default:
        state.rejected++;
        reject(now, 'bad-field', `${msg.subject}: unknown message kind ${JSON.stringify(e.kind)}`);
        return state;
    }
  });
}
