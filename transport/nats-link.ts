// Whether a NatsBus's connection is up, from the client's status stream (nats-status.ts):
// down between a drop and the reconnect, the first drop (a job on the bus has lost what was
// in flight by then), and waiting until it is back.

import type { NatsConnection } from '@nats-io/transport-node';
import { NatsBusError } from './nats-bus-errors';
import { watchStatus } from './nats-status';

export interface LinkHooks {
  /** Each drop; each reconnect; each error the server reports. */
  dropped(why: Error): void;
  back(): void;
  error(err: unknown): void;
  /** A hook above threw: it must not stop the watching. */
  hookFailed(err: unknown): void;
}

export class LinkState {
  /** Between a drop and the reconnect. */
  down = false;
  /** Resolves with the first drop or the close, whichever comes first. */
  readonly firstDrop: Promise<Error>;
  private drop: (e: Error) => void = () => {};
  private waiting: (() => void)[] = [];
  private closedWith: Error | null = null;

  constructor(
    private readonly url: string,
    connection: NatsConnection,
    hooks: LinkHooks,
  ) {
    this.firstDrop = new Promise<Error>((resolve) => (this.drop = resolve));
    const guarded = (f: () => void) => {
      try {
        f();
      } catch (e) {
        hooks.hookFailed(e);
      }
    };
    void watchStatus(connection, {
      disconnect: () => {
        const why = new NatsBusError(`lost the connection to NATS at ${url}`);
        this.down = true;
        this.drop(why);
        guarded(() => hooks.dropped(why));
      },
      reconnect: () => {
        this.down = false;
        this.wake();
        guarded(() => hooks.back());
      },
      error: (e) => guarded(() => hooks.error(e)),
    });
  }

  closed(why: Error): void {
    this.closedWith = why;
    this.drop(why);
    this.wake();
  }

  /** Resolves once connected (at once when it is); rejects once closed for good, or when still down after `timeoutMs`. */
  async up(timeoutMs: number): Promise<void> {
    if (this.closedWith) throw this.closedWith;
    if (!this.down) return;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((_, reject) => {
      timer = setTimeout(
        () => reject(new NatsBusError(`NATS at ${this.url} was still unreachable after ${timeoutMs} ms`)),
        timeoutMs,
      );
    });
    try {
      await Promise.race([new Promise<void>((resolve) => this.waiting.push(resolve)), late]);
    } finally {
      clearTimeout(timer);
    }
    if (this.closedWith) throw this.closedWith;
  }

  private wake(): void {
    for (const w of this.waiting.splice(0)) w();
  }
}
