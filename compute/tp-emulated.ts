// Emulated compute of one rank of a wide job: the stage is held for the rank's drawn
// duration, then an F or B of a tensor-parallel stage runs its collective for real over
// the bus (actors/bus-all-reduce.ts) with the ranks of its group, at the profile's
// all-reduce cost, so a rank cannot finish a task its peers have not reached. Each rank
// contributes rank + 1 and checks the sum: a collective the group's ranks entered for
// different tasks never completes (the deadlock the coordination prevents), and one that
// summed anything else fails the job. At the end of an iteration of a job with D > 1
// replicas the stage's gradients are all-reduced across replicas the same way (in float64,
// as the real compute's partial gradient sums travel).

import { Task, formatTask } from '../policies/task';
import { Clock } from '../base/clock';
import { AllReduce, Floats } from '../models/all-reduce';
import { StageCompute, TaskDurations, remainingMs } from '../stage/compute';

type Reduce<A extends Floats = Float32Array> = (key: string, data: A, then: (sum: A | Error) => void) => void;

export interface LaneCollectives {
  /** The rank's tensor-parallel group (T > 1), its rank and size. */
  readonly tp?: {
    readonly allReduce: AllReduce;
    readonly reduce: Reduce;
    readonly rank: number;
    readonly ranks: number;
  };
  /** The stage's replicas (D > 1), this replica and their count. */
  readonly dp?: {
    readonly allReduce: AllReduce<Float64Array>;
    readonly reduce: Reduce<Float64Array>;
    readonly replica: number;
    readonly replicas: number;
  };
}

export class CollectiveEmulatedCompute implements StageCompute {
  readonly kind = 'emulated-collective';
  constructor(
    private readonly clock: Clock,
    private readonly stage: number,
    private readonly durations: TaskDurations,
    private readonly groups: LaneCollectives,
    private readonly fail: (err: Error) => void,
  ) {}

  run(iteration: number, t: Task, done: () => void, startedAt?: number): void {
    this.clock.setTimer(remainingMs(this.clock, this.durations.compute(iteration, this.stage, t), startedAt), () => {
      const tp = this.groups.tp;
      if (!tp || t.kind === 'W') return done();
      this.reduceAndCheck(tp.reduce, Float32Array, `it${iteration}/${formatTask(t)}`, tp.rank, tp.ranks, done);
    });
  }

  /** The replicas' gradient all-reduce, without holding the stage's mailbox while the peers get there. */
  endIterationLater(iteration: number, then: (body: Record<string, unknown>) => void): void {
    const dp = this.groups.dp;
    if (!dp) return then({});
    this.reduceAndCheck(dp.reduce, Float64Array, `it${iteration}/grads`, dp.replica, dp.replicas, () => then({}));
  }

  private reduceAndCheck<A extends Floats>(
    reduce: Reduce<A>,
    array: { of(...n: number[]): A },
    key: string,
    member: number,
    members: number,
    then: () => void,
  ): void {
    reduce(key, array.of(member + 1), (sum) => {
      const want = (members * (members + 1)) / 2;
      if (sum instanceof Error) return this.fail(sum);
      if (sum.length !== 1 || sum[0] !== want)
        return this.fail(
          new Error(
            `stage ${this.stage}: all-reduce ${key} summed to ${sum[0]}, not ${want}: a member was missing or twice`,
          ),
        );
      then();
    });
  }
}
