// What a launcher hears back from node agents: their replies, decoded, kept in order, and
// waited on (until a predicate holds, a timeout, or the end of the job).

import { decodeValue } from '../transport/codec';
import { peerText } from '../base/quote';
import { JobError } from './wire-stage';

export type Reply = Record<string, unknown> & { verb: string; name: string };

export class ReplyBox {
  readonly queue: Reply[] = [];
  private waiters: (() => void)[] = [];
  private closed = false;
  push(r: Reply): void {
    this.queue.push(r);
    this.wake();
  }
  /** End every wait (the job is over): a wait that lost a race must not keep the process alive. */
  close(): void {
    this.closed = true;
    this.wake();
  }
  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }
  /** Wait until `pred` holds for the replies so far; returns the matching ones. */
  async waitFor(pred: (rs: Reply[]) => boolean, timeoutMs: number, what: () => string): Promise<Reply[]> {
    const deadline = Date.now() + timeoutMs;
    while (!pred(this.queue)) {
      if (this.closed) throw new JobError(`gave up waiting for ${what()}: the job ended`);
      const left = deadline - Date.now();
      if (left <= 0) throw new JobError(`timed out after ${timeoutMs} ms waiting for ${what()}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(left, 200));
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
    return this.queue;
  }
}

export async function pollUntil(pred: () => boolean, timeoutMs: number, over: () => boolean): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!pred()) {
    if (over()) throw new JobError('gave up polling: the job ended');
    if (Date.now() > deadline) throw new JobError(`timed out after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A field of a node's reply, for an error message (a string as it is, anything else quoted). */
export const text = (x: unknown): string => peerText(x, 2000);

export function decodeReply(data: Uint8Array): Reply | null {
  try {
    const v = decodeValue(data) as Reply;
    return v && typeof v === 'object' && typeof v.verb === 'string' && typeof v.name === 'string' ? v : null;
  } catch {
    return null;
  }
}
