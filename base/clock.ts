// Clocks. Every actor reads time and sets timers through a Clock, so the same actors
// run on the wall clock and on a virtual clock that jumps to the next timer once every
// actor is idle. The virtual clock refuses to go backwards.

export interface TimerHandle {
  readonly id: number;
}

export interface Clock {
  readonly kind: 'real' | 'virtual';
  /** Milliseconds: on the real clock the system's monotonic clock (shared by every process
   * of a machine, so events of stage processes line up); since start on the virtual one. */
  now(): number;
  setTimer(ms: number, fire: () => void): TimerHandle;
  clearTimer(h: TimerHandle): void;
  /** Cancel every pending timer (the runtime that owns the clock has shut down). */
  clearAll(): void;
}

/** The longest delay Node's timers take (2^31 − 1 ms, about 24.8 days): a longer one fires after 1 ms. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** How long before a deadline a real-clock timer stops sleeping and starts yielding. */
const SPIN_MS = 0.5;
/** Left after a timer's sleep, more than this means the sleep was one leg of a long timer (Node's timers may fire a little early, never this early). */
const LONG_LEG_MS = 1000;

/** Milliseconds on the system's monotonic clock: the real clock's time base. */
export function monotonicNow(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

export class RealClock implements Clock {
  readonly kind = 'real';
  private nextId = 1;
  private readonly live = new Map<number, NodeJS.Timeout | NodeJS.Immediate>();
  now(): number {
    return monotonicNow();
  }

  /**
   * Node's timers fire a millisecond or more late, which would add up along a pipeline's
   * critical path; so the timer sleeps until shortly before the deadline and then yields
   * with setImmediate until the deadline has passed.
   */
  setTimer(ms: number, fire: () => void): TimerHandle {
    const id = this.nextId++;
    const deadline = performance.now() + Math.max(0, ms);
    const finish = () => {
      if (!this.live.has(id)) return;
      const left = deadline - performance.now();
      if (left > LONG_LEG_MS) {
        // A timer longer than Node's limit sleeps in legs; a short remainder spins as usual.
        this.live.set(id, setTimeout(finish, Math.min(left - SPIN_MS, MAX_TIMER_MS)));
        return;
      }
      if (left > 0) {
        this.live.set(id, setImmediate(finish));
        return;
      }
      this.live.delete(id);
      fire();
    };
    this.live.set(id, setTimeout(finish, Math.min(Math.max(0, ms - SPIN_MS), MAX_TIMER_MS)));
    return { id };
  }

  clearTimer(h: TimerHandle): void {
    const t = this.live.get(h.id);
    if (t) {
      clearTimeout(t as NodeJS.Timeout);
      clearImmediate(t as NodeJS.Immediate);
    }
    this.live.delete(h.id);
  }

  clearAll(): void {
    for (const id of [...this.live.keys()]) this.clearTimer({ id });
  }
}

interface PendingTimer {
  at: number;
  seq: number;
  id: number;
  fire: () => void;
}

export class ClockError extends Error {
  override name = 'ClockError';
}

/**
 * Virtual time. Work done by actors is counted with `enter`/`leave` (the actor runtime
 * does this around every message); when the count is zero the clock is quiescent and
 * `run` advances to the earliest timer. Timers due at the same instant fire in the
 * order they were set, so a run is deterministic.
 */
export class VirtualClock implements Clock {
  readonly kind = 'virtual';
  private t = 0;
  private seq = 0;
  private nextId = 1;
  private readonly heap: PendingTimer[] = [];
  private readonly live = new Set<number>();
  private busy = 0;
  private wakeIdle: (() => void) | null = null;

  now(): number {
    return this.t;
  }

  setTimer(ms: number, fire: () => void): TimerHandle {
    if (!(ms >= 0) || !Number.isFinite(ms))
      throw new ClockError(`timer duration must be a finite number >= 0, got ${ms}`);
    const id = this.nextId++;
    this.live.add(id);
    heapPush(this.heap, { at: this.t + ms, seq: this.seq++, id, fire });
    return { id };
  }

  clearTimer(h: TimerHandle): void {
    this.live.delete(h.id);
  }

  clearAll(): void {
    this.live.clear();
  }

  enter(): void {
    this.busy++;
  }

  leave(): void {
    if (--this.busy === 0 && this.wakeIdle) {
      const wake = this.wakeIdle;
      this.wakeIdle = null;
      wake();
    }
  }

  get pendingTimers(): number {
    return this.live.size;
  }

  private idle(): Promise<void> {
    if (this.busy === 0) return Promise.resolve();
    return new Promise((resolve) => (this.wakeIdle = resolve));
  }

  /**
   * Advance time until `stop()` is true or nothing is left to do (no work, no timers).
   * Returns true when stopped by `stop`, false when the system went quiet first.
   */
  async run(stop: () => boolean): Promise<boolean> {
    for (;;) {
      await this.idle();
      if (stop()) return true;
      const next = this.popLive();
      if (!next) return false;
      if (next.at < this.t) throw new ClockError(`virtual clock would go backwards: ${next.at} < ${this.t}`);
      this.t = next.at;
      next.fire();
      // Fire every other timer due at this same instant before waiting for quiescence,
      // so simultaneous completions are all visible to the actors in one round.
      while (this.heap.length > 0 && this.heap[0].at === this.t) {
        const same = this.popLive();
        if (same) same.fire();
      }
    }
  }

  private popLive(): PendingTimer | undefined {
    while (this.heap.length > 0) {
      const top = heapPop(this.heap)!;
      if (this.live.delete(top.id)) return top;
    }
    return undefined;
  }
}

function before(a: PendingTimer, b: PendingTimer): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq);
}

function heapPush(h: PendingTimer[], x: PendingTimer): void {
  h.push(x);
  let i = h.length - 1;
  while (i > 0) {
    const p = (i - 1) >> 1;
    if (!before(h[i], h[p])) break;
    [h[i], h[p]] = [h[p], h[i]];
    i = p;
  }
}

function heapPop(h: PendingTimer[]): PendingTimer | undefined {
  if (h.length === 0) return undefined;
  const top = h[0];
  const last = h.pop()!;
  if (h.length > 0) {
    h[0] = last;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < h.length && before(h[l], h[m])) m = l;
      if (r < h.length && before(h[r], h[m])) m = r;
      if (m === i) break;
      [h[i], h[m]] = [h[m], h[i]];
      i = m;
    }
  }
  return top;
}
