// Messages of any size over a server with a small max_payload: a message too big for one
// NATS message goes out as numbered chunks, and each subscription reassembles them.
//
// A chunk is a frame of its own, told apart from a whole message by its first byte: 0xFF
// is CBOR's "break", which no CBOR item starts with, so no envelope is ever taken for a
// chunk. Frame (little-endian):
//
//   0  magic   4 bytes  FF 'B' 'C' 01
//   4  sender  8 bytes  random per bus, fixed for its life
//   12 msg     u32      message number, per sender
//   16 index   u32      this chunk's number, 0-based
//   20 count   u32      chunks in the message
//   24 total   u32      the whole message's length, bytes
//   28 crc     u32      CRC-32 of bytes 4..27 and of this chunk's payload
//   32 payload          (total / count rounded up bytes, the last chunk the rest)
//
// Every chunk is checked (magic, fields in range and consistent with the message's first
// chunk, payload length for its index, CRC) before a byte of it is kept. A bad chunk, a
// chunk whose message did not complete within the reassembly timeout, and a partial message
// pushed out by the memory bounds are each a counted rejection (`ChunkRejection`), never a
// throw. Memory is bounded per sender and per subscription; a partial message holds one
// buffer of its declared length, allocated at its first valid chunk.
//
// NATS core keeps the order of one publisher's messages on a subject, so chunks normally
// arrive in order; reassembly does not rely on it (a fault-injecting bus reorders).

import { randomBytes } from 'crypto';
import { crc32 } from 'zlib';

export const CHUNK_HEADER_BYTES = 32;
const MAGIC = [0xff, 0x42, 0x43, 0x01] as const;

export interface ChunkLimits {
  /** Largest whole message, bytes. */
  maxMessageBytes: number;
  /** PartialMessage messages' bytes one sender may hold in one subscription; default 2 × maxMessageBytes. */
  maxBytesPerSender?: number;
  /** PartialMessage messages' bytes one subscription holds over all senders; default 4 × maxMessageBytes. */
  maxBytesPerSubscription?: number;
  /** A partial message older than this is dropped (counted), ms; default 10000. */
  timeoutMs?: number;
}

export const DEFAULT_REASSEMBLY_TIMEOUT_MS = 10000;

export type ChunkRejectionReason = 'malformed' | 'checksum' | 'inconsistent' | 'oversize' | 'timeout' | 'evicted';

export class ChunkRejection extends Error {
  override name = 'ChunkRejection';
  constructor(
    readonly reason: ChunkRejectionReason,
    readonly subject: string,
    detail: string,
  ) {
    super(`chunk on ${JSON.stringify(subject)} refused (${reason}): ${detail}`);
  }
}

/** True when `data` starts like a chunk frame (it may still be a bad one). */
export function isChunkFrame(data: Uint8Array): boolean {
  return data.byteLength >= 4 && data[0] === MAGIC[0] && data[1] === MAGIC[1] && data[2] === MAGIC[2];
}

/** What a sender needs to number its chunked messages. */
export class ChunkSender {
  readonly id: Uint8Array = randomBytes(8);
  private nextMsg = 0;

  /**
   * The frames carrying `data`, none over `maxPayload` bytes. Each frame is a fresh buffer
   * (the transport may still hold the previous one): one copy of the data in all.
   */
  frames(data: Uint8Array, maxPayload: number): Uint8Array[] {
    const room = maxPayload - CHUNK_HEADER_BYTES;
    if (room < 1) throw new RangeError(`chunking: max_payload ${maxPayload} leaves no room for a chunk`);
    const count = Math.max(1, Math.ceil(data.byteLength / room));
    const per = Math.ceil(data.byteLength / count);
    const msg = this.nextMsg;
    this.nextMsg = (this.nextMsg + 1) >>> 0;
    const out: Uint8Array[] = [];
    for (let i = 0; i < count; i++) {
      const part = data.subarray(i * per, Math.min(data.byteLength, (i + 1) * per));
      const frame = new Uint8Array(Buffer.allocUnsafeSlow(CHUNK_HEADER_BYTES + part.byteLength).buffer);
      frame.set(MAGIC, 0);
      frame.set(this.id, 4);
      const v = new DataView(frame.buffer, frame.byteOffset, CHUNK_HEADER_BYTES);
      v.setUint32(12, msg, true);
      v.setUint32(16, i, true);
      v.setUint32(20, count, true);
      v.setUint32(24, data.byteLength, true);
      frame.set(part, CHUNK_HEADER_BYTES);
      v.setUint32(28, frameCrc(frame), true);
      out.push(frame);
    }
    return out;
  }
}

function frameCrc(frame: Uint8Array): number {
  return crc32(frame.subarray(CHUNK_HEADER_BYTES), crc32(frame.subarray(4, 28)));
}

interface ChunkHeader {
  sender: string;
  msg: number;
  index: number;
  count: number;
  total: number;
}

interface PartialMessage {
  readonly subject: string;
  readonly count: number;
  readonly total: number;
  readonly buffer: Uint8Array;
  readonly have: Uint8Array;
  received: number;
  readonly startedAt: number;
}

/** One subscription's reassembly: feed it every chunk frame; it returns each completed message once. */
export class Reassembler {
  /** Chunk frames refused, by reason (a message lost to a timeout or eviction counts once). */
  readonly rejected: Record<ChunkRejectionReason, number> = {
    malformed: 0,
    checksum: 0,
    inconsistent: 0,
    oversize: 0,
    timeout: 0,
    evicted: 0,
  };
  completed = 0;
  private readonly partials = new Map<string, PartialMessage>();
  private bytesBySender = new Map<string, number>();
  private bytesHeld = 0;
  private readonly maxMessageBytes: number;
  private readonly perSender: number;
  private readonly perSubscription: number;
  private readonly timeoutMs: number;

  constructor(
    limits: ChunkLimits,
    private readonly onReject: (r: ChunkRejection) => void = () => {},
    private readonly now: () => number = () => performance.now(),
  ) {
    this.maxMessageBytes = limits.maxMessageBytes;
    this.perSender = limits.maxBytesPerSender ?? 2 * limits.maxMessageBytes;
    this.perSubscription = limits.maxBytesPerSubscription ?? 4 * limits.maxMessageBytes;
    this.timeoutMs = limits.timeoutMs ?? DEFAULT_REASSEMBLY_TIMEOUT_MS;
  }

  /** Bytes held by partial messages now. */
  get bytesPending(): number {
    return this.bytesHeld;
  }

  get partialMessages(): number {
    return this.partials.size;
  }

  /** The whole message when `frame` completes one, else null. Never throws for bad input. */
  accept(subject: string, frame: Uint8Array): Uint8Array | null {
    this.expire();
    const h = this.header(subject, frame);
    if (!h) return null;
    const key = `${h.sender}/${h.msg}`;
    let p = this.partials.get(key);
    if (!p) p = this.start(subject, key, h);
    else if (p.count !== h.count || p.total !== h.total || p.subject !== subject) {
      return this.reject('inconsistent', subject, `message ${key}: chunk ${h.index} disagrees with its first chunk`);
    }
    const per = Math.ceil(h.total / h.count);
    const payload = frame.subarray(CHUNK_HEADER_BYTES);
    const want = h.index === h.count - 1 ? h.total - per * (h.count - 1) : per;
    if (payload.byteLength !== want)
      return this.reject(
        'malformed',
        subject,
        `chunk ${h.index} of ${h.count} has ${payload.byteLength} bytes, not ${want}`,
      );
    if (p.have[h.index]) return null; // a duplicate of a chunk already kept: harmless, ignored
    p.buffer.set(payload, h.index * per);
    p.have[h.index] = 1;
    p.received++;
    if (p.received < p.count) return null;
    this.forget(key, p, h.sender);
    this.completed++;
    return p.buffer;
  }

  /** Drops partial messages older than the timeout, counting each. */
  expire(): void {
    const now = this.now();
    for (const [key, p] of this.partials) {
      if (now - p.startedAt <= this.timeoutMs) continue;
      this.forget(key, p, senderOf(key));
      this.reject(
        'timeout',
        p.subject,
        `message ${key}: ${p.received} of ${p.count} chunks within ${this.timeoutMs} ms`,
      );
    }
  }

  private header(subject: string, frame: Uint8Array): ChunkHeader | null {
    if (frame.byteLength < CHUNK_HEADER_BYTES || frame[3] !== MAGIC[3])
      return this.reject('malformed', subject, `frame of ${frame.byteLength} bytes is not a version-1 chunk`);
    const v = new DataView(frame.buffer, frame.byteOffset, CHUNK_HEADER_BYTES);
    const h: ChunkHeader = {
      sender: Buffer.from(frame.buffer, frame.byteOffset + 4, 8).toString('hex'),
      msg: v.getUint32(12, true),
      index: v.getUint32(16, true),
      count: v.getUint32(20, true),
      total: v.getUint32(24, true),
    };
    if (v.getUint32(28, true) !== frameCrc(frame)) return this.reject('checksum', subject, 'CRC-32 does not match');
    if (h.count < 1 || h.index >= h.count || h.total < h.count)
      return this.reject('malformed', subject, `chunk ${h.index} of ${h.count} for ${h.total} bytes`);
    if (h.total > this.maxMessageBytes)
      return this.reject('oversize', subject, `message of ${h.total} bytes, over the limit of ${this.maxMessageBytes}`);
    return h;
  }

  private start(subject: string, key: string, h: ChunkHeader): PartialMessage {
    // Room first: the sender's oldest partials, then anyone's, make way (each counted).
    while ((this.bytesBySender.get(h.sender) ?? 0) + h.total > this.perSender) {
      if (!this.evictOldest((k) => senderOf(k) === h.sender)) break;
    }
    while (this.bytesHeld + h.total > this.perSubscription) {
      if (!this.evictOldest(() => true)) break;
    }
    const p: PartialMessage = {
      subject,
      count: h.count,
      total: h.total,
      buffer: new Uint8Array(Buffer.allocUnsafeSlow(h.total).buffer, 0, h.total),
      have: new Uint8Array(h.count),
      received: 0,
      startedAt: this.now(),
    };
    this.partials.set(key, p);
    this.bytesBySender.set(h.sender, (this.bytesBySender.get(h.sender) ?? 0) + h.total);
    this.bytesHeld += h.total;
    return p;
  }

  private evictOldest(match: (key: string) => boolean): boolean {
    for (const [key, p] of this.partials) {
      if (!match(key)) continue;
      this.forget(key, p, senderOf(key));
      this.reject('evicted', p.subject, `message ${key}: ${p.received} of ${p.count} chunks, over the memory bound`);
      return true;
    }
    return false;
  }

  private forget(key: string, p: PartialMessage, sender: string): void {
    this.partials.delete(key);
    const left = (this.bytesBySender.get(sender) ?? 0) - p.total;
    if (left > 0) this.bytesBySender.set(sender, left);
    else this.bytesBySender.delete(sender);
    this.bytesHeld -= p.total;
  }

  private reject(reason: ChunkRejectionReason, subject: string, detail: string): null {
    this.rejected[reason]++;
    try {
      this.onReject(new ChunkRejection(reason, subject, detail));
    } catch {
      /* the hook must not break delivery */
    }
    return null;
  }
}

function senderOf(key: string): string {
  return key.slice(0, key.indexOf('/'));
}
