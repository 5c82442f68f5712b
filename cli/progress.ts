// Progress of a training run on stderr: one line per iteration (synchronous mode) or, in
// asynchronous mode, a line every so often from the event stream (updates done, the
// staleness stage 0 observed, pace, elapsed and ETA). On a terminal the line is redrawn in
// place; elsewhere each is its own line. The asynchronous loss shown is the latest
// microbatch's, from the loss stage's task-end event.

import { IterationRecord } from '../actors/coordinator';
import { BatonEvent } from '../stage/events';

export interface ProgressOptions {
  readonly mode: 'sync' | 'async';
  /** Iterations (sync) or updates (async) the run will do. */
  readonly total: number;
  /** Iterations or updates done before this run started (a resumed checkpoint). */
  readonly first?: number;
  /** Training tokens per iteration (sync) or per update (async). */
  readonly tokensPerUnit: number;
  /** On the virtual clock a makespan is no time: the pace shown is the virtual makespan. */
  readonly clock: 'real' | 'virtual';
  readonly write: (s: string) => void;
  /** Redraw one line in place (a terminal) instead of writing a line each time. */
  readonly tty: boolean;
  /** Wall-clock ms (default performance.now). */
  readonly now?: () => number;
  /** Asynchronous mode: least ms between two lines (default 1000; the last update always writes). */
  readonly everyMs?: number;
}

/** "1m05s", "12.3s": a duration short enough to read at a glance. */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '?';
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${String(Math.floor(s % 60)).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
}

/** Observed staleness at stage 0: updates that stage made between a microbatch's forward and its backward. */
export class StalenessMeter {
  private updates = 0;
  private readonly atForward = new Map<number, number>();
  private sum = 0;
  private count = 0;
  max = 0;

  /** Counts a finished update; true when `e` was one (a backward of chunk 0 at stage 0 ending). */
  observe(e: BatonEvent): boolean {
    if (e.stage !== 0 || (e.type !== 'task-start' && e.type !== 'task-end') || e.chunk !== 0) return false;
    if (e.type === 'task-start' && e.kind === 'F') this.atForward.set(e.mb, this.updates);
    if (e.type === 'task-start' && e.kind === 'B') {
      const at = this.atForward.get(e.mb);
      if (at !== undefined) {
        const lag = this.updates - at;
        this.sum += lag;
        this.count++;
        this.max = Math.max(this.max, lag);
        this.atForward.delete(e.mb);
      }
    }
    if (e.type === 'task-end' && e.kind === 'B') {
      this.updates++;
      return true;
    }
    return false;
  }

  get done(): number {
    return this.updates;
  }

  get mean(): number {
    return this.count > 0 ? this.sum / this.count : 0;
  }
}

export class TrainProgress {
  private readonly start: number;
  private readonly now: () => number;
  private readonly staleness = new StalenessMeter();
  private lastLine = -Infinity;
  private drawn = false;
  /** Asynchronous mode: the loss of the latest microbatch the loss stage finished (its task-end carries it). */
  private lastLoss: number | undefined;

  constructor(private readonly o: ProgressOptions) {
    this.now = o.now ?? (() => performance.now());
    this.start = this.now();
  }

  /** Synchronous mode: one line per finished iteration. */
  onIteration(rec: IterationRecord, loss: number | undefined): void {
    if (this.o.mode !== 'sync') return;
    const done = rec.iteration + 1 - (this.o.first ?? 0);
    const pace =
      this.o.clock === 'virtual'
        ? `makespan ${rec.makespan.toFixed(1)} ms (virtual)`
        : `${(this.o.tokensPerUnit / (rec.makespan / 1000)).toFixed(0)} tokens/s`;
    const lossText = loss === undefined ? '' : `  loss ${loss.toFixed(4)}`;
    this.line(`iteration ${rec.iteration + 1}/${(this.o.first ?? 0) + this.o.total}${lossText}  ${pace}`, done);
  }

  /** Asynchronous mode: an event sink (updates are stage 0's finished backwards). */
  readonly sink = (e: BatonEvent): void => {
    if (this.o.mode !== 'async') return;
    if (e.type === 'task-end' && e.loss !== undefined) this.lastLoss = e.loss;
    if (!this.staleness.observe(e)) return;
    const done = this.staleness.done;
    const t = this.now();
    if (done < this.o.total && t - this.lastLine < (this.o.everyMs ?? 1000)) return;
    this.lastLine = t;
    const seconds = (t - this.start) / 1000;
    const pace = this.o.clock === 'virtual' ? '' : `  ${((done * this.o.tokensPerUnit) / seconds).toFixed(0)} tokens/s`;
    this.line(
      `update ${done}/${this.o.total}${this.lastLoss === undefined ? '' : `  loss ${this.lastLoss.toFixed(4)}`}  staleness at stage 0 mean ${this.staleness.mean.toFixed(1)} max ${this.staleness.max}${pace}`,
      done,
    );
  };

  /** Ends the redrawn line on a terminal. */
  finish(): void {
    if (this.o.tty && this.drawn) this.o.write('\n');
    this.drawn = false;
  }

  private line(text: string, done: number): void {
    const elapsed = this.now() - this.start;
    const left = this.o.total - done;
    const eta = done > 0 ? formatDuration((elapsed / done) * left) : '?';
    const full = `${text}  elapsed ${formatDuration(elapsed)}  ETA ${left <= 0 ? '0s' : eta}`;
    this.drawn = true;
    this.o.write(this.o.tty ? `\r${full}\x1b[K` : `${full}\n`);
  }
}
