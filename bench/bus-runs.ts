// The runs the bus benchmark (bus-throughput.ts) times: raw nats.js, and Baton's codec +
// NatsBus, unsealed or through an AuthBus, each on fresh connections to one server. The
// receiver is in the publisher's process (`processes: 1`: each message sealed and opened on
// one thread) or in a child process (`processes: 2`, as a job's stages are).

import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { encodeEnvelopeParts } from '../transport/codec';
import { NatsBus } from '../transport/nats-bus';
import { AuthBus } from '../transport/auth-bus';
import { newJobKey } from '../transport/auth-seal';
import type { Bus } from '../transport/bus';
import { CHUNK_HEADER_BYTES } from '../transport/chunking';
import { pump } from './bus-pump';
import { float32Activation } from './activation-envelope';
import { BATON_SUBJECT, RAW_SUBJECT, benchTensor, openReceiver } from './bus-receiver';
import type { BusSide, Receiver, ReceiverTally } from './bus-receiver';
import { openRemoteReceiver } from './bus-remote-receiver';

export { isViewInto } from './bus-receiver';
export type { BusSide } from './bus-receiver';

/** NATS messages a Baton message of `bytes` takes under `maxPayload`. */
function chunksFor(bytes: number, maxPayload: number): number {
  return bytes <= maxPayload ? 1 : Math.ceil(bytes / (maxPayload - CHUNK_HEADER_BYTES));
}

/** Decoded tensors that were views into their message, of all decoded; and chunks per message. */
export interface ZeroCopyTally {
  views: number;
  total: number;
  chunks?: number;
}

export interface RunSpec {
  url: string;
  /** Payload bytes per message. */
  bytes: number;
  /** Messages in the run. */
  n: number;
  /** Most messages published but not yet received. */
  window: number;
  maxPayload: number;
  /** 1: the receiver in this process; 2: in a child process. */
  processes: 1 | 2;
}

/** A publisher: sends message `i`; `perMessage` NATS messages (raw pieces) make one. */
interface Publisher {
  send(i: number): void;
  perMessage: number;
  close(): Promise<void>;
}

async function rawPublisher(spec: RunSpec): Promise<Publisher> {
  // Over the limit, each message goes as pieces of at most max_payload bytes, as many in flight.
  const pieces = Math.ceil(spec.bytes / spec.maxPayload);
  const piece = Math.ceil(spec.bytes / pieces);
  const payloads = Array.from({ length: pieces }, (_, i) =>
    new Uint8Array(Math.min(piece, spec.bytes - i * piece)).fill(7),
  );
  const nc: NatsConnection = await connect({ servers: spec.url });
  return {
    send: (i) => nc.publish(RAW_SUBJECT, payloads[i % pieces]),
    perMessage: pieces,
    close: () => nc.close(),
  };
}

async function batonPublisher(spec: RunSpec, key: Uint8Array | undefined, zc: ZeroCopyTally): Promise<Publisher> {
  const nats = await NatsBus.connect(spec.url);
  const bus: Bus = key ? new AuthBus(nats, key, 'bench-pub') : nats;
  const base = float32Activation('bench', benchTensor(spec.bytes));
  return {
    send: (i) => {
      // As the sender actor does (actors/sender.ts): parts, copied once into the client.
      const parts = encodeEnvelopeParts({ ...base, seq: i, mb: i, sentAt: Date.now() });
      zc.chunks = chunksFor(
        parts.reduce((n, x) => n + x.byteLength, 0),
        nats.maxPayload,
      );
      bus.publishParts?.(BATON_SUBJECT, parts);
    },
    perMessage: 1,
    close: () => bus.close(),
  };
}

/** What a finished run's receiver saw that it should not have; empty when all is well. */
function faults(side: BusSide, spec: RunSpec, t: ReceiverTally): string {
  if (t.ackErrors > 0) return `${t.ackErrors} acknowledgements could not be sent`;
  if (side === 'raw')
    return t.gotBytes === spec.n * spec.bytes ? '' : `received ${t.gotBytes} bytes, expected ${spec.n * spec.bytes}`;
  return t.badValue > 0 || t.handlerErrors > 0 || t.refusedSeals > 0
    ? `${t.badValue} wrong tensors, ${t.handlerErrors} handler errors, ${t.refusedSeals} refused seals`
    : '';
}

/**
 * One timed run of `side`: MB/s of payload (tensor payload for Baton's sides). Counts in `zc`
 * the decoded tensors that were views into their message.
 */
export async function sideRun(side: BusSide, spec: RunSpec, zc: ZeroCopyTally): Promise<number> {
  const what = `${side} run`;
  const key = side === 'sealed' ? newJobKey() : undefined;
  const open = spec.processes === 2 ? openRemoteReceiver : openReceiver;
  const receiver: Receiver = await open({ url: spec.url, side, bytes: spec.bytes, key });
  let pub: Publisher | undefined;
  let seconds: number;
  try {
    pub = side === 'raw' ? await rawPublisher(spec) : await batonPublisher(spec, key, zc);
    const p = pub;
    seconds = await pump(spec.n * p.perMessage, spec.window * p.perMessage, receiver.received, p.send).catch(
      (e: Error) => {
        throw new Error(`${what}: ${e.message}`);
      },
    );
  } finally {
    await Promise.all([pub?.close(), receiver.close()]);
  }
  const t = receiver.tally();
  zc.total += t.decoded;
  zc.views += t.views;
  const wrong = faults(side, spec, t);
  if (wrong) throw new Error(`${what}: ${wrong}`);
  return (spec.n * spec.bytes) / 1e6 / seconds;
}
