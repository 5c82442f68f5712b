// Emulated compute of one rank of a wide job: the stage is held for the rank's drawn
// duration, then an F or B of a tensor-parallel stage runs its collective for real over
// the bus (actors/bus-all-reduce.ts) with the ranks of its group, at the profile's
// all-reduce cost, so a rank cannot finish a task its peers have not reached. Each rank
// contributes rank + 1 and checks the sum: a collective the group's ranks entered for
// different tasks never completes (the deadlock the coordination prevents), and one that
// summed anything else fails the job. At the end of an iteration of a job with D > 1
// replicas the stage's gradients are all-reduced across replicas the same way.

import { Task, formatTask } from '../policies/task';
import { Clock } from '../base/clock';
import { AllReduce } from '../models/all-reduce';
import { StageCompute, TaskDurations, remainingMs } from '../stage/compute';

export interface LaneCollectives {
  /** The rank's tensor-parallel group (T > 1), its rank and size. */
  readonly tp?: { readonly allReduce: AllReduce; readonly rank: number; readonly ranks: number };
  /** The stage's replicas (D > 1), this replica and their count. */
  readonly dp?: { readonly allReduce: AllReduce; readonly replica: number; readonly replicas: number };
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
      const key = `it${iteration}/${formatTask(t)}`;
      this.reduceAndCheck(tp.allReduce, key, tp.rank, tp.ranks).then(done, this.fail);
    });
  }

  async endIteration(iteration: number): Promise<Record<string, unknown>> {
    const dp = this.groups.dp;
    if (dp) await this.reduceAndCheck(dp.allReduce, `it${iteration}/grads`, dp.replica, dp.replicas);
    return {};
  }

  private async reduceAndCheck(allReduce: AllReduce, key: string, member: number, members: number): Promise<void> {
    const sum = await allReduce(key, Float32Array.of(member + 1));
    const want = (members * (members + 1)) / 2;
    if (sum.length !== 1 || sum[0] !== want)
      throw new Error(
        `stage ${this.stage}: all-reduce ${key} summed to ${sum[0]}, not ${want}: a member was missing or twice`,
      );
  }
}
