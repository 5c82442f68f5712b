// The real (tfjs) compute of a synchronous training stage: a whole stage (TrainingCompute),
// or in a wide job one TP rank's share of it (TpTrainingCompute) meeting its group through
// the lane's AllReduce, and a replica's stage whose flush all-reduces its gradients with the
// other replicas'. The modules that compute with TensorFlow.js are loaded on first use: a
// process that hosts only emulated stages (baton run, sim) starts without loading tfjs.

import { ActorRuntime } from '../actors/runtime';
import { LaneCollectives } from '../compute/tp-emulated';
import { ReplicaGroup } from '../compute/replica-reduce';
import { TrainConfig } from '../models/train-config';
import { PipelineShape } from '../policies/task';
import { StageCompute } from '../stage/compute';
import { Lane, laneName } from '../transport/lanes';
import { resumeSnapshot } from './checkpoint';
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

/** The synchronous training compute of stage `stage` (of `lane` in a wide job). */
export function syncTrainingCompute(o: {
  runtime: ActorRuntime;
  cfg: JobConfig;
  shape: PipelineShape;
  stage: number;
  collectives: LaneCollectives;
  lane?: Lane;
}): StageCompute {
  const { runtime, cfg, shape, stage, collectives } = o;
  const train = cfg.train!;
  const dp: ReplicaGroup | undefined = collectives.dp && {
    replica: collectives.dp.replica,
    replicas: collectives.dp.replicas,
    allReduce: collectives.dp.allReduce,
  };
  const tp = collectives.tp;
  if (!tp)
    return new (tfjsModules().sync.TrainingCompute)(stage, shape, train, resumeSnapshot(train, stage), {
      weights: partitionWeights(cfg),
      dp,
    });
  const name = `stage-${laneName(stage, o.lane)}`;
  const rank = { rank: tp.rank, ranks: tp.ranks, allReduce: tp.allReduce, fail: (e: unknown) => runtime.fail(name, e) };
  return new (tfjsModules().tp.TpTrainingCompute)(stage, shape, train, rank, { dp });
}
