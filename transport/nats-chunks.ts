// Chunking (chunking.ts) as NatsBus uses it: the frames one publish goes out as, and a
// reassembler per subscription, all expired by one timer so a chunked message whose last
// chunks never come is dropped by its timeout even when nothing else arrives.

import { ChunkSender, Reassembler, isChunkFrame } from './chunking';
import type { ChunkRejection } from './chunking';

/** One subscription's receiving end: a whole message, or null while (or because) chunks are held or refused. */
export interface ChunkReceiver {
  accept(subject: string, data: Uint8Array): Uint8Array | null;
  /** Drops the reassembler (at unsubscribe). */
  close(): void;
}

export class NatsChunking {
  /** Messages sent in chunks, and chunk frames (or whole chunked messages) refused on receipt. */
  chunkedOut = 0;
  chunkRejections = 0;
  private readonly sender = new ChunkSender();
  private readonly reassemblers = new Set<Reassembler>();
  private readonly expiry: NodeJS.Timeout;

  constructor(
    private readonly maxMessageBytes: number,
    /** Called with every refusal, after it is counted. */
    private readonly onRejection: (r: ChunkRejection) => void,
  ) {
    this.expiry = setInterval(() => this.reassemblers.forEach((r) => r.expire()), 1000).unref();
  }

  /**
   * The NATS messages `data` goes out as when `room` bytes fit in one: itself, or chunks.
   * A whole message that happens to look like a chunk frame is chunked too, so it cannot be mistaken for one.
   */
  frames(data: Uint8Array, room: number): Uint8Array[] {
    const frames = data.byteLength > room || isChunkFrame(data) ? this.sender.frames(data, room) : [data];
    if (frames.length > 1 || frames[0] !== data) this.chunkedOut++;
    return frames;
  }

  /** The receiving end of a new subscription. */
  receiver(): ChunkReceiver {
    const chunks = new Reassembler({ maxMessageBytes: this.maxMessageBytes }, (r) => {
      this.chunkRejections++;
      this.onRejection(r);
    });
    this.reassemblers.add(chunks);
    return {
      accept: (subject, data) => (isChunkFrame(data) ? chunks.accept(subject, data) : data),
      close: () => this.reassemblers.delete(chunks),
    };
  }

  /** Stops the expiry timer (at close). */
  stop(): void {
    clearInterval(this.expiry);
  }
}
