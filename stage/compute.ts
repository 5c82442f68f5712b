// What a task does while it occupies its stage. The stage actor asks its compute to
// run a task and is told when it is done; emulated compute just holds the stage for a
// duration drawn from the workload profile (models/durations.ts).

import { Task } from '../policies/task';
import { TensorPayload } from '../transport/envelope';
import { Clock } from '../base/clock';

/** Thrown by `checkArrival`: the tensors a peer's message brings are not what the stage takes. The
 * message is rejected (counted, logged) and the stage carries on. */
export class ArrivalRefusedError extends Error {
  override name = 'ArrivalRefusedError';
}

export interface StageCompute {
  readonly kind: string;
  /** True when run() computes synchronously on this thread (real tfjs compute), holding the event loop until it returns. */
  readonly blocking?: boolean;
  /**
   * Run `t` of `iteration`; call `done` exactly once when it has finished, with the tensors
   * to send on. `startedAt` is when the stage started the task (its task-start time).
   */
  run(
    iteration: number,
    t: Task,
    /** `loss`: the training loss the task computed (a loss stage's), carried by its task-end event for progress. */
    done: (out?: readonly TensorPayload[], loss?: number) => void,
    startedAt?: number,
  ): void;
  /**
   * Throws ArrivalRefusedError when the tensors an activation ('input') or a gradient ('grad') brings are not
   * what this stage takes; the stage asks before the arrival counts, so a bad message is
   * rejected whole and the good one can still come.
   */
  checkArrival?(kind: 'input' | 'grad', mb: number, chunk: number, tensors: readonly TensorPayload[]): void;
  /** Tensors that arrived with an activation ('input') or a gradient ('grad'), after checkArrival. */
  accept?(
    iteration: number,
    kind: 'input' | 'grad',
    mb: number,
    chunk: number,
    tensors: readonly TensorPayload[],
  ): void;
  /**
   * The largest messages this stage will send (a tensor message, the final parameter
   * snapshot in its report), estimated from the model's shapes, so a job whose messages
   * the bus cannot carry is refused before it runs instead of failing at its end.
   */
  largestMessages?(): readonly { readonly what: string; readonly bytes: number }[];
  /** End of a synchronous iteration (the optimizer step); resolves with fields for the stage's report. */
  endIteration?(iteration: number): Promise<Record<string, unknown>>;
  /**
   * Instead of endIteration: end the iteration without holding the stage's mailbox (a
   * collective with peers that reach it later, on the virtual clock), calling `then` with the
   * report's fields when done.
   */
  endIterationLater?(iteration: number, then: (body: Record<string, unknown>) => void): void;
  /** An asynchronous stage that keeps snapshots: send one of its state as it is now (the job is being dropped). */
  snapshotNow?(): Promise<void>;
  dispose?(): void;
}

export interface TaskDurations {
  compute(iteration: number, stage: number, t: Task): number;
}

/**
 * What is left of an emulated task of `ms` that its stage started at `startedAt`: the
 * emulated device is busy from the task's start, not from when the stage, after its
 * other bookkeeping, set the timer. On the virtual clock nothing is left out.
 */
export function remainingMs(clock: Clock, ms: number, startedAt: number | undefined): number {
  return startedAt === undefined ? ms : Math.max(0, ms - (clock.now() - startedAt));
}

export class EmulatedCompute implements StageCompute {
  readonly kind = 'emulated';
  constructor(
    private readonly clock: Clock,
    private readonly stage: number,
    private readonly durations: TaskDurations,
  ) {}

  run(iteration: number, t: Task, done: () => void, startedAt?: number): void {
    this.clock.setTimer(remainingMs(this.clock, this.durations.compute(iteration, this.stage, t), startedAt), () =>
      done(),
    );
  }
}
