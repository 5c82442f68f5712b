// The runs the bus benchmark (bus-throughput.ts) times: raw nats.js, and Baton's codec +
// NatsBus, unsealed or through an AuthBus, each on two fresh connections to one server.

import { connect } from '@nats-io/transport-node';
import { decodeEnvelope, encodeEnvelopeParts } from '../transport/codec';
import { NatsBus } from '../transport/nats-bus';
import { AuthBus } from '../transport/auth-bus';
import { newJobKey } from '../transport/auth-seal';
import type { Bus } from '../transport/bus';
import { CHUNK_HEADER_BYTES } from '../transport/chunking';
import { pump } from './bus-pump';
import { float32Activation } from './activation-envelope';

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

/** True when `t` is a view into the bytes of `msg` (its buffer, within its range): no copy was made. */
export function isViewInto(t: ArrayBufferView, msg: Uint8Array): boolean {
  return (
    t.buffer === msg.buffer &&
    t.byteOffset >= msg.byteOffset &&
    t.byteOffset + t.byteLength <= msg.byteOffset + msg.byteLength
  );
}

/** One run of raw nats.js: MB/s of payload. */
export async function rawRun(
  url: string,
  bytes: number,
  n: number,
  window: number,
  maxPayload: number,
): Promise<number> {
  // Over the limit, each message goes as pieces of at most max_payload bytes, as many in flight.
  const pieces = Math.ceil(bytes / maxPayload);
  const pub = await connect({ servers: url });
  const sub = await connect({ servers: url }).catch(async (e: unknown) => {
    await pub.close();
    throw e;
  });
  try {
    let got = 0;
    let gotBytes = 0;
    sub.subscribe('bench.raw', {
      callback: (e, m) => {
        if (e) return;
        got++;
        gotBytes += m.data.byteLength;
      },
    });
    await sub.flush();
    const piece = Math.ceil(bytes / pieces);
    const payloads = Array.from({ length: pieces }, (_, i) =>
      new Uint8Array(Math.min(piece, bytes - i * piece)).fill(7),
    );
    const s = await pump(
      n * pieces,
      window * pieces,
      () => got,
      (i) => pub.publish('bench.raw', payloads[i % pieces]),
    ).catch((e: Error) => {
      throw new Error(`raw run: ${e.message}`);
    });
    if (gotBytes !== n * bytes) throw new Error(`raw run: received ${gotBytes} bytes, expected ${n * bytes}`);
    return (n * bytes) / 1e6 / s;
  } finally {
    await Promise.all([pub.close(), sub.close()]);
  }
}

/**
 * One run of Baton's path (encode, NatsBus, decode; through an AuthBus when `sealed`): MB/s of
 * tensor payload. Counts in `zc` the decoded tensors that were views into their message.
 */
export async function batonRun(
  url: string,
  bytes: number,
  n: number,
  window: number,
  zc: ZeroCopyTally,
  sealed: boolean,
): Promise<number> {
  const pubNats = await NatsBus.connect(url);
  const subNats = await NatsBus.connect(url).catch(async (e: unknown) => {
    await pubNats.close();
    throw e;
  });
  const key = newJobKey();
  const pub: Bus = sealed ? new AuthBus(pubNats, key, 'bench-pub') : pubNats;
  const sub: Bus = sealed ? new AuthBus(subNats, key, 'bench-sub') : subNats;
  try {
    const tensor = new Float32Array(bytes / 4).map((_, i) => i * 0.001);
    let got = 0;
    let badValue = 0;
    sub.subscribe('baton.bench.activation.1', (_s, d) => {
      // Counted as received even when decoding throws (NatsBus counts it in `errors`), so the run ends and says so.
      try {
        const e = decodeEnvelope(d);
        const t = e.tensors[0].data as Float32Array;
        zc.total++;
        if (isViewInto(t, d)) zc.views++;
        if (t[t.length - 1] !== tensor[tensor.length - 1]) badValue++;
      } finally {
        got++;
      }
    });
    await sub.flush();
    const base = float32Activation('bench', tensor);
    const s = await pump(
      n,
      window,
      () => got,
      (i) => {
        // As the sender actor does (actors/sender.ts): parts, copied once into the client.
        const parts = encodeEnvelopeParts({ ...base, seq: i, mb: i, sentAt: Date.now() });
        zc.chunks = chunksFor(
          parts.reduce((n, x) => n + x.byteLength, 0),
          pubNats.maxPayload,
        );
        pub.publishParts?.('baton.bench.activation.1', parts);
      },
    ).catch((e: Error) => {
      throw new Error(`baton run: ${e.message}`);
    });
    const refused = sub instanceof AuthBus ? sub.rejectedCount : 0;
    if (badValue > 0 || subNats.errors > 0 || refused > 0)
      throw new Error(
        `baton run: ${badValue} wrong tensors, ${subNats.errors} handler errors, ${refused} refused seals`,
      );
    return (n * bytes) / 1e6 / s;
  } finally {
    await Promise.all([pub.close(), sub.close()]);
  }
}
