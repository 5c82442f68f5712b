// Bus throughput for tensor-sized messages on loopback NATS: (a) raw nats.js
// publish/subscribe of a Uint8Array, (b) Baton's path: encodeEnvelope + NatsBus.publish
// -> subscribe + decodeEnvelope, with a float32 tensor of the same byte size. Both use
// two connections (publisher, subscriber) to one local nats-server and the same
// in-flight window, so the ratio b/a is the cost of Baton's codec and bus wrapper; (c) is
// (b) through an AuthBus (transport/auth-bus.ts), every message sealed and checked, as jobs
// over NATS run: its ratio to (a) is the target.
// Reports medians over repeats (raw and Baton runs interleaved, which goes first
// alternating from one repeat to the next, so a drift does not favour one side) and
// whether every decoded tensor was a zero-copy view into the bytes of the received message.
//
// With --max-payload M (MiB) the server takes messages of at most M MiB (1: a stock
// nats-server's config), so Baton's messages over it go in chunks (transport/chunking.ts)
// and raw nats.js sends each message's bytes as pieces of at most M MiB: the same limit.
//
// Run: node dist/bench/bus-throughput.js [--json] [--messages N] [--repeats R] [--mb S] [--max-payload M]
// Not measured: latency, fan-out, cross-machine networks.

import { connect } from '@nats-io/transport-node';
import { decodeEnvelope, encodeEnvelope } from '../transport/codec';
import type { Envelope } from '../transport/envelope';
import { NatsBus } from '../transport/nats-bus';
import { AuthBus } from '../transport/auth-bus';
import { newJobKey } from '../transport/auth-seal';
import type { Bus } from '../transport/bus';
import { startNatsServer } from '../transport/nats-server';
import { benchMain, positiveInt } from './bench-cli';
import { inTurn } from './in-turn';
import { median } from '../checks/stats';
import { UsageError } from '../cli/args';
import { DEFAULT_MAX_PAYLOAD } from '../transport/nats-server-config';
import { CHUNK_HEADER_BYTES } from '../transport/chunking';

/** NATS messages a Baton message of `bytes` takes under `maxPayload`. */
function chunksFor(bytes: number, maxPayload: number): number {
  return bytes <= maxPayload ? 1 : Math.ceil(bytes / (maxPayload - CHUNK_HEADER_BYTES));
}

/** A stock nats-server's max_payload (its config has none). */
const STOCK_MAX_PAYLOAD = 1024 * 1024;

function maxPayloadFlag(mib: number): number {
  const bytes = Math.round(mib * 1048576);
  if (!(bytes >= 64 * 1024 && bytes <= DEFAULT_MAX_PAYLOAD))
    throw new UsageError(`--max-payload must be from 0.0625 to 64 MiB, got ${mib}`);
  return bytes;
}

export interface BusThroughputOptions {
  /** Payload bytes per message; default 4 MiB. */
  messageBytes?: number;
  /** Messages per run; default 200. */
  messages?: number;
  /** Runs of each kind; the median is reported. Default 3. */
  repeats?: number;
  /** Most messages published but not yet received; default 8. */
  window?: number;
  /** The server's max_payload, bytes; default the generated server's 64 MiB (1 MiB: a stock server). */
  maxPayload?: number;
}

export interface BusThroughputResult {
  messageBytes: number;
  messages: number;
  repeats: number;
  maxPayload: number;
  /** NATS messages per raw message (pieces of at most max_payload) and per Baton message (chunks). */
  piecesPerMessage: number;
  chunksPerMessage: number;
  /** Median MB/s (1 MB = 1e6 bytes of payload) for raw nats.js. */
  rawMBps: number;
  /** Median MB/s of tensor payload through encode + NatsBus + decode, unsealed. */
  batonMBps: number;
  /** Median MB/s of the same through an AuthBus: every message sealed and its seal checked. */
  sealedMBps: number;
  /** sealedMBps / rawMBps: what jobs get (they seal every message). */
  ratio: number;
  /** batonMBps / rawMBps. */
  unsealedRatio: number;
  target: number;
  /** True when every decoded tensor was a view into the received message. */
  zeroCopyDecode: boolean;
  zeroCopyFraction: number;
  rawRunsMBps: number[];
  batonRunsMBps: number[];
  sealedRunsMBps: number[];
}

const round = (x: number) => Math.round(x * 10) / 10;

/** How long a run waits for the next message before it fails (NATS core may drop messages). */
export const STALL_MS = 30000;

/**
 * Publish `n` messages with at most `window` in flight; resolves with the elapsed seconds.
 * Rejects when no message arrives for `stallMs` while some are due, instead of waiting forever.
 */
export async function pump(
  n: number,
  window: number,
  received: () => number,
  send: (i: number) => void,
  stallMs = STALL_MS,
): Promise<number> {
  const t0 = process.hrtime.bigint();
  let seen = received();
  let since = performance.now();
  const wait = async (until: () => boolean) => {
    while (!until()) {
      await new Promise((r) => setImmediate(r));
      const now = performance.now();
      if (received() !== seen) [seen, since] = [received(), now];
      else if (now - since > stallMs)
        throw new Error(`${received()} of ${n} messages received; none for ${stallMs} ms`);
    }
  };
  for (let i = 0; i < n; i++) {
    await wait(() => i - received() < window);
    send(i);
  }
  await wait(() => received() >= n);
  return Number(process.hrtime.bigint() - t0) / 1e9;
}

/** True when `t` is a view into the bytes of `msg` (its buffer, within its range): no copy was made. */
export function isViewInto(t: ArrayBufferView, msg: Uint8Array): boolean {
  return (
    t.buffer === msg.buffer &&
    t.byteOffset >= msg.byteOffset &&
    t.byteOffset + t.byteLength <= msg.byteOffset + msg.byteLength
  );
}

/** The order of the sides in repeat `r`: raw first in even repeats, sealed Baton first in odd ones. */
export function repeatOrder(r: number): readonly ('raw' | 'baton' | 'sealed')[] {
  return inTurn(['raw', 'baton', 'sealed'] as const, r);
}

async function rawRun(url: string, bytes: number, n: number, window: number, maxPayload: number): Promise<number> {
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

async function batonRun(
  url: string,
  bytes: number,
  n: number,
  window: number,
  zc: { views: number; total: number; chunks?: number },
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
    const base: Omit<Envelope, 'seq' | 'mb'> = {
      v: 1,
      job: 'bench',
      kind: 'activation',
      iteration: 0,
      chunk: 0,
      dir: 'forward',
      src: 0,
      dst: 1,
      sentAt: 0,
      bytes: 0,
      tensors: [{ dtype: 'float32', shape: [tensor.length], data: tensor }],
    };
    const s = await pump(
      n,
      window,
      () => got,
      (i) => {
        const data = encodeEnvelope({ ...base, seq: i, mb: i, sentAt: Date.now() });
        zc.chunks = chunksFor(data.byteLength, pubNats.maxPayload);
        pub.publish('baton.bench.activation.1', data);
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

export async function benchBusThroughput(opts: BusThroughputOptions = {}): Promise<BusThroughputResult> {
  const bytes = opts.messageBytes ?? 4 * 1024 * 1024;
  const n = opts.messages ?? 200;
  const repeats = opts.repeats ?? 3;
  const window = opts.window ?? 8;
  const maxPayload = opts.maxPayload ?? DEFAULT_MAX_PAYLOAD;
  if (bytes % 4 !== 0) throw new RangeError(`messageBytes ${bytes} must be a multiple of 4 (float32 tensor)`);
  const server = await startNatsServer(maxPayload === STOCK_MAX_PAYLOAD ? { stock: true } : { maxPayload });
  try {
    const zc: { views: number; total: number; chunks?: number } = { views: 0, total: 0 };
    await rawRun(server.url, bytes, Math.min(n, 20), window, maxPayload); // warm up both paths
    await batonRun(server.url, bytes, Math.min(n, 20), window, { views: 0, total: 0 }, false);
    await batonRun(server.url, bytes, Math.min(n, 20), window, { views: 0, total: 0 }, true);
    const raw: number[] = [];
    const baton: number[] = [];
    const sealed: number[] = [];
    for (let r = 0; r < repeats; r++) {
      for (const side of repeatOrder(r)) {
        if (side === 'raw') raw.push(await rawRun(server.url, bytes, n, window, maxPayload));
        else if (side === 'baton') baton.push(await batonRun(server.url, bytes, n, window, zc, false));
        else sealed.push(await batonRun(server.url, bytes, n, window, zc, true));
      }
    }
    const rawMBps = median(raw);
    const batonMBps = median(baton);
    const sealedMBps = median(sealed);
    return {
      messageBytes: bytes,
      messages: n,
      repeats,
      maxPayload,
      piecesPerMessage: Math.ceil(bytes / maxPayload),
      chunksPerMessage: zc.chunks ?? 1,
      rawMBps: round(rawMBps),
      batonMBps: round(batonMBps),
      sealedMBps: round(sealedMBps),
      ratio: Math.round((sealedMBps / rawMBps) * 1000) / 1000,
      unsealedRatio: Math.round((batonMBps / rawMBps) * 1000) / 1000,
      target: 0.85,
      zeroCopyDecode: zc.views === zc.total,
      zeroCopyFraction: zc.total ? zc.views / zc.total : 0,
      rawRunsMBps: raw.map(round),
      batonRunsMBps: baton.map(round),
      sealedRunsMBps: sealed.map(round),
    };
  } finally {
    await server.stop();
  }
}

/** The table: message size in MiB as given (not rounded to one decimal), MB/s of 1e6 bytes. */
export function formatBusThroughput(r: BusThroughputResult): string {
  return [
    `bus throughput, ${r.messages} × ${+(r.messageBytes / 1048576).toPrecision(6)} MiB float32 messages, median of ${r.repeats}:`,
    ...(r.chunksPerMessage > 1
      ? [
          `  max_payload ${+(r.maxPayload / 1048576).toPrecision(6)} MiB: Baton sends each message in ${r.chunksPerMessage} chunks, raw nats.js in ${r.piecesPerMessage} pieces`,
        ]
      : []),
    `  raw nats.js              ${r.rawMBps.toFixed(1)} MB/s   runs ${r.rawRunsMBps.join(', ')}`,
    `  Baton codec + NatsBus    ${r.batonMBps.toFixed(1)} MB/s   runs ${r.batonRunsMBps.join(', ')}   (unsealed; ratio ${r.unsealedRatio.toFixed(3)})`,
    `  Baton, sealed (AuthBus)  ${r.sealedMBps.toFixed(1)} MB/s   runs ${r.sealedRunsMBps.join(', ')}`,
    `  ratio sealed/raw ${r.ratio.toFixed(3)} (target >= ${r.target})${r.ratio >= r.target ? '' : '  BELOW TARGET'}`,
    `  zero-copy decode: ${r.zeroCopyDecode ? 'yes' : `no (${(r.zeroCopyFraction * 100).toFixed(1)}% of messages)`}`,
  ].join('\n');
}

if (require.main === module) {
  benchMain(
    'bus',
    "tensor messages through Baton's codec + NATS bus against raw nats.js, zero-copy decode",
    [
      {
        name: 'mb',
        type: 'number',
        metavar: 'MB',
        help: 'message size in MiB (a float32 tensor: a multiple of 4 bytes)',
        default: 4,
      },
      { name: 'messages', type: 'int', metavar: 'N', help: 'messages per measured run', default: 200 },
      { name: 'repeats', type: 'int', metavar: 'R', help: 'runs per side (the median is reported)', default: 3 },
      {
        name: 'max-payload',
        type: 'number',
        metavar: 'MB',
        help: "the server's max_payload in MiB (1: a stock nats-server, messages over it go in chunks)",
        default: DEFAULT_MAX_PAYLOAD / 1048576,
      },
    ],
    async (flags) => {
      const mb = flags.mb as number;
      const bytes = Math.round(mb * 1024 * 1024);
      if (!(mb > 0 && mb <= 48) || bytes % 4 !== 0)
        throw new UsageError(
          `--mb must be a size from 4 bytes to 48 MiB that is a whole number of float32 values, got ${mb}`,
        );
      const r = await benchBusThroughput({
        messages: positiveInt(flags, 'messages'),
        repeats: positiveInt(flags, 'repeats'),
        messageBytes: bytes,
        maxPayload: maxPayloadFlag(flags.maxPayload as number),
      });
      return flags.json ? r : formatBusThroughput(r);
    },
  );
}
