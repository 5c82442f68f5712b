// A Bus that injects faults into what it publishes: it drops, duplicates, delays and
// reorders messages with the probabilities of a FaultSpec, drawn from its seed, so a run
// with faults can be repeated. It wraps the bus a stage's sender publishes on (every other
// publish and every subscription passes through untouched) and only touches the subjects
// `affects` selects. Delays and held-back messages run on the caller's clock, so on the
// virtual clock of the simulator they take virtual time.

import { seededUniform } from '../base/seeded-uniform';
import type { Bus, BusHandler, Subscription } from './bus';
import type { Clock, TimerHandle } from '../base/clock';
import type { FaultSpec } from './fault-spec';

export interface FaultCounts {
  dropped: number;
  duplicated: number;
  delayed: number;
  reordered: number;
}

interface Held {
  readonly data: Uint8Array;
  readonly seal: Uint8Array | undefined;
  readonly timer: TimerHandle;
}

export class FaultBus implements Bus {
  readonly counts: FaultCounts = { dropped: 0, duplicated: 0, delayed: 0, reordered: 0 };
  private readonly draw: () => number;
  /** Per subject, a message held back until the next one on it (or its timer) has gone. */
  private readonly held = new Map<string, Held>();
  private closed = false;

  constructor(
    readonly inner: Bus,
    readonly spec: FaultSpec,
    private readonly clock: Pick<Clock, 'setTimer' | 'clearTimer'>,
    private readonly affects: (subject: string) => boolean = () => true,
  ) {
    this.draw = seededUniform(spec.seed);
  }

  get kind(): string {
    return this.inner.kind;
  }

  get maxMessageBytes(): number {
    return this.inner.maxMessageBytes;
  }

  publish(subject: string, data: Uint8Array, seal?: Uint8Array): void {
    if (!this.affects(subject)) return this.inner.publish(subject, data, seal);
    const { drop, dup, delay, delayMs, reorder } = this.spec;
    // Every draw is made for every message, so one fault's probability does not shift the others' draws.
    const [d, u, l, lateBy, r] = [this.draw(), this.draw(), this.draw(), this.draw(), this.draw()];
    if (d < drop) {
      this.counts.dropped++;
      this.releaseHeld(subject);
      return;
    }
    const copies = u < dup ? 2 : 1;
    if (copies === 2) this.counts.duplicated++;
    const out = () => {
      if (this.closed) return;
      for (let i = 0; i < copies; i++) this.inner.publish(subject, data, seal);
    };
    if (l < delay && delayMs > 0) {
      this.counts.delayed++;
      this.clock.setTimer(lateBy * delayMs, out);
      return;
    }
    if (r < reorder && !this.held.has(subject)) {
      this.counts.reordered++;
      const timer = this.clock.setTimer(delayMs, () => this.releaseHeld(subject));
      this.held.set(subject, { data, seal, timer });
      if (copies === 2) this.inner.publish(subject, data, seal);
      return;
    }
    out();
    this.releaseHeld(subject);
  }

  private releaseHeld(subject: string): void {
    const h = this.held.get(subject);
    if (!h) return;
    this.held.delete(subject);
    this.clock.clearTimer(h.timer);
    if (!this.closed) this.inner.publish(subject, h.data, h.seal);
  }

  subscribe(subject: string, handler: BusHandler): Subscription {
    return this.inner.subscribe(subject, handler);
  }

  flush(): Promise<void> {
    return this.inner.flush();
  }

  written(): Promise<void> {
    return this.inner.written();
  }

  /** Stops delivering what is still delayed or held; the bus underneath is the owner's to close. */
  async close(): Promise<void> {
    this.closed = true;
    for (const h of this.held.values()) this.clock.clearTimer(h.timer);
    this.held.clear();
  }
}
