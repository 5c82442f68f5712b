// Stage computes that need no tensors, so a process that runs only emulated stages never
// loads TensorFlow.js: AsyncEmulatedCompute holds the stage for the profile's duration
// and still drives the parameter store, so simulations of asynchronous mode report
// staleness exactly as training runs do; TimedCompute makes real compute hold its stage
// for the emulated duration, so a training run on the virtual clock has the profile's
// timing and a deterministic order.

import { Task } from '../policies/task';
import { TensorPayload } from '../transport/envelope';
import { Clock } from '../base/clock';
import { StageCompute, TaskDurations, remainingMs } from '../stage/compute';
import { StoreMsg, StoreStats } from '../actors/param-store';
import { ActorRef, ActorRuntime } from '../actors/runtime';

export async function storeStats(runtime: ActorRuntime, store: ActorRef<StoreMsg>): Promise<StoreStats> {
  return runtime.ask<StoreMsg, StoreStats>(store, (reply) => ({ type: 'stats', reply }), 60000);
}

/** Emulated compute in asynchronous mode: holds the stage, and reports F and B to the store. */
export class AsyncEmulatedCompute implements StageCompute {
  readonly kind = 'emulated-async';
  constructor(
    private readonly runtime: ActorRuntime,
    private readonly stage: number,
    private readonly durations: TaskDurations,
    private readonly store: ActorRef<StoreMsg>,
  ) {}

  run(iteration: number, t: Task, done: () => void, startedAt?: number): void {
    const clock = this.runtime.clock;
    clock.setTimer(remainingMs(clock, this.durations.compute(iteration, this.stage, t), startedAt), () => {
      this.runtime.send(
        this.store,
        t.kind === 'F' ? { type: 'forward-ran', mb: t.mb } : { type: 'backward-ran', mb: t.mb },
      );
      done();
    });
  }

  async endIteration(): Promise<Record<string, unknown>> {
    return { store: await storeStats(this.runtime, this.store) };
  }
}

/** Real compute that holds its stage for the emulated duration afterwards (virtual-clock training). */
export class TimedCompute implements StageCompute {
  readonly kind: string;
  constructor(
    private readonly inner: StageCompute,
    private readonly clock: Clock,
    private readonly stage: number,
    private readonly durations: TaskDurations,
  ) {
    this.kind = `${inner.kind}+timed`;
    if (inner.checkArrival) this.checkArrival = inner.checkArrival.bind(inner);
    if (inner.accept) this.accept = inner.accept.bind(inner);
    if (inner.endIteration) this.endIteration = inner.endIteration.bind(inner);
    if (inner.dispose) this.dispose = inner.dispose.bind(inner);
    if (inner.largestMessages) this.largestMessages = inner.largestMessages.bind(inner);
  }
  checkArrival?: StageCompute['checkArrival'];
  accept?: StageCompute['accept'];
  endIteration?: StageCompute['endIteration'];
  dispose?: StageCompute['dispose'];
  largestMessages?: StageCompute['largestMessages'];

  run(iteration: number, t: Task, done: (out?: readonly TensorPayload[]) => void): void {
    this.inner.run(iteration, t, (out) =>
      this.clock.setTimer(this.durations.compute(iteration, this.stage, t), () => done(out)),
    );
  }
}
