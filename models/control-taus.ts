// The τ of every parameter for the projection control (policies/consistency/
// projection-control.ts): the FRESCO τ the parameter's layer would have at a reference
// depth P under asynchronous 1F1B, where stage s keeps P − s microbatches in flight and
// an update protects the P − s − 1 still in flight. The stage of each layer is the one
// the asynchronous mode's own partition (planPartition, as stageModules plans it) puts it
// in at that depth.

import { planPartition } from './partition';
import { TrainConfig, corpusFor, modelSpecFor } from './train-config';
import { ModelConfigError } from './gpt';

export function controlTaus(train: TrainConfig, stages: number): Map<string, number> {
  const spec = modelSpecFor(train, corpusFor(train).vocabSize);
  const layers = [spec.embed, ...spec.blocks, spec.head];
  if (!(Number.isInteger(stages) && stages >= 1 && stages <= layers.length - 2 + Math.min(2, layers.length)))
    throw new ModelConfigError(
      `projection control: reference depth ${stages} for a model of ${spec.blocks.length} blocks`,
    );
  const plan = planPartition(spec, { stages, chunks: 1, recomputedForward: true });
  const out = new Map<string, number>();
  for (const v of plan.virtual)
    for (const name of v.layers) {
      const layer = layers.find((l) => l.name === name);
      if (!layer)
        throw new ModelConfigError(
          `projection control: the partition names layer "${name}", which the model does not have`,
        );
      for (const p of layer.params) out.set(p.name, stages - 1 - v.stage);
    }
  return out;
}
