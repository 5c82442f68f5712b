// The real (tfjs) compute of a synchronous training stage: a whole stage (TrainingCompute),
// or in a wide job one TP rank's share of it (TpTrainingCompute) meeting its group through
// the lane's AllReduce, and a replica's stage whose flush all-reduces its gradients with the
// other replicas'. The modules that compute with TensorFlow.js are loaded on first use: a
// process that hosts only emulated stages (baton run, sim) starts without loading tfjs.

import { ActorRuntime } from '../actors/runtime';
import type { AllReduce, Floats } from '../models/all-reduce';
import { LaneCollectives } from '../compute/tp-emulated';
import { ReplicaGroup } from '../compute/replica-reduce';
import { TrainConfig } from '../models/train-config';
import { PipelineShape } from '../policies/task';
import { StageCompute } from '../stage/compute';
import { Lane, laneName } from '../transport/lanes';
import { resumeSnapshot } from './checkpoint';
import type { StageRecovery } from './stage-recovery';
import { JobConfig, partitionWeights } from './config';

export const tfjsModules = () => ({
  backend: require('../models/backend') as typeof import('../models/backend'),
  sync: require('../compute/training') as typeof import('../compute/training'),
  tp: require('../compute/tp-training') as typeof import('../compute/tp-training'),
  async: require('../compute/async-training') as typeof import('../compute/async-training'),
  config: require('../models/train-config') as typeof import('../models/train-config'),
});

/** Load the tfjs backend a training config asks for (once per process). */
export async function loadTrainingBackend(t: TrainConfig): Promise<string> {
  return (await tfjsModules().backend.loadBackend({ force: t.backend ?? undefined })).backend;
}

/** Ms spent inside collectives (from contributing to holding the sum: the peers' lateness included), per iteration. */
class CollectiveTimer {
  private readonly ms = { tp: 0, dp: 0 };
  wrap<A extends Floats>(which: 'tp' | 'dp', ar: AllReduce<A>): AllReduce<A> {
    return async (key, data) => {
      const t0 = performance.now();
      try {
        return await ar(key, data);
      } finally {
        this.ms[which] += performance.now() - t0;
      }
    };
  }
  /** The iteration's figures for the report body, and a fresh count. */
  take(): { tp: number; dp: number } {
    const out = { ...this.ms };
    this.ms.tp = this.ms.dp = 0;
    return out;
  }
}

/** The synchronous training compute of stage `stage` (of `lane` in a wide job); a wide one's report
 * body carries `all_reduce_ms`, its time in the TP group's and the replicas' all-reduces that iteration. */
export function syncTrainingCompute(o: {
  runtime: ActorRuntime;
  cfg: JobConfig;
  shape: PipelineShape;
  stage: number;
  collectives: LaneCollectives;
  lane?: Lane;
  /** A recoverable job's stage (not wide): the state to start from, and whether to keep sending it. */
  recovery?: StageRecovery;
}): StageCompute {
  const { runtime, cfg, shape, stage, collectives } = o;
  const train = cfg.train!;
  const timer = new CollectiveTimer();
  const dp: ReplicaGroup | undefined = collectives.dp && {
    replica: collectives.dp.replica,
    replicas: collectives.dp.replicas,
    allReduce: timer.wrap('dp', collectives.dp.allReduce),
  };
  const tp = collectives.tp;
  const weights = partitionWeights(cfg);
  if (!tp && !dp)
    return new (tfjsModules().sync.TrainingCompute)(
      stage,
      shape,
      train,
      o.recovery?.resume ?? resumeSnapshot(train, stage),
      {
        weights,
        stateEvery: o.recovery?.stateEvery ?? 0,
      },
    );
  const name = `stage-${laneName(stage, o.lane)}`;
  const compute = tp
    ? new (tfjsModules().tp.TpTrainingCompute)(
        stage,
        shape,
        train,
        {
          rank: tp.rank,
          ranks: tp.ranks,
          allReduce: timer.wrap('tp', tp.allReduce),
          fail: (e) => runtime.fail(name, e),
        },
        { dp },
      )
    : new (tfjsModules().sync.TrainingCompute)(stage, shape, train, undefined, { weights, dp });
  // The timer's figures join the body the compute's flush reports.
  const flush = compute.endIteration.bind(compute);
  compute.endIteration = async (it) => ({ ...(await flush(it)), all_reduce_ms: timer.take() });
  return compute;
}
