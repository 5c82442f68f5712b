// Bus throughput for tensor-sized messages on loopback NATS: (a) raw nats.js
// publish/subscribe of a Uint8Array, (b) Baton's path: encodeEnvelope + NatsBus.publish
// -> subscribe + decodeEnvelope, with a float32 tensor of the same byte size. Both use
// two connections (publisher, subscriber) to one local nats-server and the same
// in-flight window, so the ratio b/a is the cost of Baton's codec and bus wrapper; (c) is
// (b) through an AuthBus (transport/auth-bus.ts), every message sealed and checked, as jobs
// over NATS run: its ratio to (a) is the target. Each is measured with the subscriber in the
// publisher's process and in a child process of its own (--processes), whose acks over NATS
// hold the window; that child is started afresh for each run, raw's as Baton's (a cold start
// that costs Baton's decoding and seal checks more than raw's counting).
// Reports medians over repeats (raw and Baton runs interleaved, which goes first
// alternating from one repeat to the next, so a drift does not favour one side) and
// whether every decoded tensor was a zero-copy view into the bytes of the received message.
//
// With --max-payload M (MiB) the server takes messages of at most M MiB (1: a stock
// nats-server's config), so Baton's messages over it go in chunks (transport/chunking.ts)
// and raw nats.js sends each message's bytes as pieces of at most M MiB: the same limit.
//
// Run: node dist/bench/bus-throughput.js [--json] [--messages N] [--repeats R] [--mb S] [--max-payload M] [--processes 1|2|both]
// Not measured: latency, fan-out, cross-machine networks.

import { startNatsServer } from '../transport/nats-server';
import { benchMain, positiveInt } from './bench-cli';
import { inTurn } from './in-turn';
import { median } from '../checks/stats';
import { UsageError } from '../cli/args';
import { DEFAULT_MAX_PAYLOAD } from '../transport/nats-server-config';
import { sideRun } from './bus-runs';
import type { BusSide, RunSpec, ZeroCopyTally } from './bus-runs';

/** A stock nats-server's max_payload (its config has none). */
const STOCK_MAX_PAYLOAD = 1024 * 1024;

function maxPayloadFlag(mib: number): number {
  const bytes = Math.round(mib * 1048576);
  if (!(bytes >= 64 * 1024 && bytes <= DEFAULT_MAX_PAYLOAD))
    throw new UsageError(`--max-payload must be from 0.0625 to 64 MiB, got ${mib}`);
  return bytes;
}

export type ProcessLayout = 1 | 2;

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
  /**
   * Where the receiver runs: 1, in the publisher's process (each message sealed and opened on
   * one thread); 2, in a child process (as a job's stages). Default both, measured in turn.
   */
  processes?: readonly ProcessLayout[];
}

/** The three sides measured with one process layout. */
export interface BusLayoutResult {
  processes: ProcessLayout;
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
  rawRunsMBps: number[];
  batonRunsMBps: number[];
  sealedRunsMBps: number[];
}

export interface BusThroughputResult {
  messageBytes: number;
  messages: number;
  repeats: number;
  maxPayload: number;
  /** NATS messages per raw message (pieces of at most max_payload) and per Baton message (chunks). */
  piecesPerMessage: number;
  chunksPerMessage: number;
  layouts: BusLayoutResult[];
  target: number;
  /** Tensors decoded in the measured runs, by either layout's receiver. */
  decodedMessages: number;
  /** True when every decoded tensor was a view into the received message. */
  zeroCopyDecode: boolean;
  zeroCopyFraction: number;
}

const round = (x: number) => Math.round(x * 10) / 10;
const ratio = (a: number, b: number) => Math.round((a / b) * 1000) / 1000;

/** The order of the sides in repeat `r`: raw first in even repeats, sealed Baton first in odd ones. */
export function repeatOrder(r: number): readonly BusSide[] {
  return inTurn(['raw', 'baton', 'sealed'] as const, r);
}

function layoutResult(processes: ProcessLayout, runs: Record<BusSide, number[]>): BusLayoutResult {
  const [raw, baton, sealed] = [median(runs.raw), median(runs.baton), median(runs.sealed)];
  return {
    processes,
    rawMBps: round(raw),
    batonMBps: round(baton),
    sealedMBps: round(sealed),
    ratio: ratio(sealed, raw),
    unsealedRatio: ratio(baton, raw),
    rawRunsMBps: runs.raw.map(round),
    batonRunsMBps: runs.baton.map(round),
    sealedRunsMBps: runs.sealed.map(round),
  };
}

export async function benchBusThroughput(opts: BusThroughputOptions = {}): Promise<BusThroughputResult> {
  const bytes = opts.messageBytes ?? 4 * 1024 * 1024;
  const n = opts.messages ?? 200;
  const repeats = opts.repeats ?? 3;
  const window = opts.window ?? 8;
  const maxPayload = opts.maxPayload ?? DEFAULT_MAX_PAYLOAD;
  const layouts = opts.processes ?? [1, 2];
  if (bytes % 4 !== 0) throw new RangeError(`messageBytes ${bytes} must be a multiple of 4 (float32 tensor)`);
  if (layouts.length === 0) throw new RangeError('processes names no layout');
  const server = await startNatsServer(maxPayload === STOCK_MAX_PAYLOAD ? { stock: true } : { maxPayload });
  try {
    const zc: ZeroCopyTally = { views: 0, total: 0 };
    const spec = (processes: ProcessLayout, messages: number): RunSpec => ({
      url: server.url,
      bytes,
      n: messages,
      window,
      maxPayload,
      processes,
    });
    for (const p of layouts)
      for (const side of repeatOrder(0)) await sideRun(side, spec(p, Math.min(n, 20)), { views: 0, total: 0 }); // warm up
    const runs = layouts.map(() => ({ raw: [], baton: [], sealed: [] }) as Record<BusSide, number[]>);
    for (let r = 0; r < repeats; r++)
      for (const [i, p] of inTurn([...layouts.entries()], r))
        for (const side of repeatOrder(r)) runs[i][side].push(await sideRun(side, spec(p, n), zc));
    return {
      messageBytes: bytes,
      messages: n,
      repeats,
      maxPayload,
      piecesPerMessage: Math.ceil(bytes / maxPayload),
      chunksPerMessage: zc.chunks ?? 1,
      layouts: layouts.map((p, i) => layoutResult(p, runs[i])),
      target: 0.85,
      decodedMessages: zc.total,
      zeroCopyDecode: zc.views === zc.total,
      zeroCopyFraction: zc.total ? zc.views / zc.total : 0,
    };
  } finally {
    await server.stop();
  }
}

const LAYOUT_TITLE: Record<ProcessLayout, string> = {
  1: 'publisher and receiver in one process (each message sealed and opened on one thread)',
  2: 'receiver in a process of its own (as the stages of a job; acks over NATS)',
};

function formatLayout(l: BusLayoutResult, target: number): string[] {
  return [
    `  ${LAYOUT_TITLE[l.processes]}:`,
    `    raw nats.js              ${l.rawMBps.toFixed(1)} MB/s   runs ${l.rawRunsMBps.join(', ')}`,
    `    Baton codec + NatsBus    ${l.batonMBps.toFixed(1)} MB/s   runs ${l.batonRunsMBps.join(', ')}   (unsealed; ratio ${l.unsealedRatio.toFixed(3)})`,
    `    Baton, sealed (AuthBus)  ${l.sealedMBps.toFixed(1)} MB/s   runs ${l.sealedRunsMBps.join(', ')}`,
    `    ratio sealed/raw ${l.ratio.toFixed(3)} (target >= ${target})${l.ratio >= target ? '' : '  BELOW TARGET'}`,
  ];
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
    ...r.layouts.flatMap((l) => formatLayout(l, r.target)),
    `  zero-copy decode: ${r.zeroCopyDecode ? 'yes' : `no (${(r.zeroCopyFraction * 100).toFixed(1)}% of messages)`}`,
  ].join('\n');
}

/** `--processes`: 1, 2 or both. */
function processesFlag(v: string): ProcessLayout[] {
  if (v === 'both') return [1, 2];
  if (v === '1' || v === '2') return [Number(v) as ProcessLayout];
  throw new UsageError(`--processes must be 1, 2 or both, got ${JSON.stringify(v)}`);
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
        name: 'processes',
        type: 'string',
        metavar: '1|2|both',
        help: "where the receiver runs: 1, the publisher's process; 2, a child process (as a job's stages); both in turn",
        default: 'both',
      },
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
        processes: processesFlag(flags.processes as string),
      });
      return flags.json ? r : formatBusThroughput(r);
    },
  );
}
