// The receiving side of one bus benchmark run (bus-runs.ts): raw nats.js counting bytes, or
// Baton's NatsBus (through an AuthBus when sealed) decoding each envelope and checking its
// tensor. The same code runs in the benchmark's process or in a child of its own
// (bus-receiver-child.ts), where sealing and opening happen on two processes as in a job.

import { connect } from '@nats-io/transport-node';
import { decodeEnvelope } from '../transport/codec';
import { NatsBus } from '../transport/nats-bus';
import { AuthBus } from '../transport/auth-bus';
import type { Bus } from '../transport/bus';

export type BusSide = 'raw' | 'baton' | 'sealed';

export const RAW_SUBJECT = 'bench.raw';
export const BATON_SUBJECT = 'baton.bench.activation.1';

/** What a receiver saw, checked by the run once every message is in. */
export interface ReceiverTally {
  /** NATS messages (raw: pieces) or envelopes received. */
  got: number;
  gotBytes: number;
  /** Decoded tensors, and those that were views into their message (no copy). */
  decoded: number;
  views: number;
  badValue: number;
  handlerErrors: number;
  refusedSeals: number;
  /** Acknowledgements that could not be sent (a child's): the run reports them as a fault. */
  ackErrors: number;
}

export interface Receiver {
  received(): number;
  tally(): ReceiverTally;
  close(): Promise<void>;
}

export interface ReceiverSpec {
  url: string;
  side: BusSide;
  /** Tensor bytes per message (float32 values i × 0.001). */
  bytes: number;
  /** The job key of a sealed run. */
  key?: Uint8Array;
  /** Called after each message is counted (a child acknowledges it). Must not throw. */
  onMessage?: (got: number) => void;
}

/** True when `t` is a view into the bytes of `msg` (its buffer, within its range): no copy was made. */
export function isViewInto(t: ArrayBufferView, msg: Uint8Array): boolean {
  return (
    t.buffer === msg.buffer &&
    t.byteOffset >= msg.byteOffset &&
    t.byteOffset + t.byteLength <= msg.byteOffset + msg.byteLength
  );
}

/** The tensor every run sends: `bytes / 4` float32 values i × 0.001. */
export function benchTensor(bytes: number): Float32Array {
  return new Float32Array(bytes / 4).map((_, i) => i * 0.001);
}

/**
 * Tells `onMessage` of the message just counted. A throw would end nats.js's reader loop, so
 * it is counted instead (each ack carries the count so far: a later one makes up for it).
 */
function counted(spec: ReceiverSpec, t: ReceiverTally): void {
  try {
    spec.onMessage?.(t.got);
  } catch {
    t.ackErrors++;
  }
}

function emptyTally(): ReceiverTally {
  return { got: 0, gotBytes: 0, decoded: 0, views: 0, badValue: 0, handlerErrors: 0, refusedSeals: 0, ackErrors: 0 };
}

async function rawReceiver(spec: ReceiverSpec): Promise<Receiver> {
  const nc = await connect({ servers: spec.url });
  const t = emptyTally();
  nc.subscribe(RAW_SUBJECT, {
    callback: (e, m) => {
      if (e) return;
      t.got++;
      t.gotBytes += m.data.byteLength;
      counted(spec, t);
    },
  });
  await nc.flush();
  return { received: () => t.got, tally: () => ({ ...t }), close: () => nc.close() };
}

async function batonReceiver(spec: ReceiverSpec): Promise<Receiver> {
  const nats = await NatsBus.connect(spec.url);
  const bus: Bus = spec.side === 'sealed' ? new AuthBus(nats, spec.key!, 'bench-sub') : nats;
  const t = emptyTally();
  const last = Math.fround((spec.bytes / 4 - 1) * 0.001);
  bus.subscribe(BATON_SUBJECT, (_s, d) => {
    // Counted as received even when decoding throws (NatsBus counts it in `errors`), so the run ends and says so.
    try {
      const tensor = decodeEnvelope(d).tensors[0].data as Float32Array;
      t.decoded++;
      t.gotBytes += tensor.byteLength;
      if (isViewInto(tensor, d)) t.views++;
      if (tensor[tensor.length - 1] !== last) t.badValue++;
    } finally {
      t.got++;
      counted(spec, t);
    }
  });
  await bus.flush();
  return {
    received: () => t.got,
    tally: () => ({
      ...t,
      handlerErrors: nats.errors,
      refusedSeals: bus instanceof AuthBus ? bus.rejectedCount : 0,
    }),
    close: () => bus.close(),
  };
}

/** Subscribes (and flushes, so the subscription is in place) the receiving side of `spec.side`. */
export function openReceiver(spec: ReceiverSpec): Promise<Receiver> {
  if (spec.side === 'sealed' && !spec.key) throw new Error('a sealed receiver needs the job key');
  return spec.side === 'raw' ? rawReceiver(spec) : batonReceiver(spec);
}
