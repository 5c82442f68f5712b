// The non-pipelined reference: the whole model in one piece, trained with the same
// data, loss scaling, microbatch-ordered accumulation and AdamW step as the pipeline
// (compute/training.ts). Pipelined training must reach the same parameters.

import * as tf from '@tensorflow/tfjs';
import { createHash } from 'crypto';
import { AdamW } from '../policies/optim/adamw';
import { OrderedSum } from '../policies/optim/ordered-sum';
import { lrAt } from '../policies/optim/schedule';
import { buildFullModel } from './partition';
import { ModelSpec, StageModule } from './stage-module';
import { TrainConfig, batchFor, corpusFor, modelSpecFor } from './train-config';
import { assignValues, paramInfos, readFloat32, viewFloat32 } from './tensor-io';
import { stepVariables } from './adamw-step';
import { nativeAccumulate } from './native-adamw';

export interface ReferenceResult {
  params: Map<string, Float32Array>;
  losses: number[];
}

/** Parameter names of a model in the fixed order of its layers (embed, blocks, head). */
export function paramOrder(spec: ModelSpec): string[] {
  return [spec.embed, ...spec.blocks, spec.head].flatMap((l) => l.params.map((p) => p.name));
}

/** sha256 over every parameter's float32 bytes, in the model's fixed parameter order. */
export function paramChecksum(spec: ModelSpec, params: ReadonlyMap<string, Float32Array>): string {
  const h = createHash('sha256');
  for (const name of paramOrder(spec)) {
    const p = params.get(name);
    if (!p) throw new Error(`checksum: parameter ${name} is missing`);
    h.update(Buffer.from(p.buffer, p.byteOffset, p.byteLength));
  }
  return h.digest('hex');
}

export function trainReference(t: TrainConfig, microbatches: number, iterations: number): ReferenceResult {
  const corpus = corpusFor(t);
  const spec = modelSpecFor(t, corpus.vocabSize);
  const model = buildFullModel(spec);
  const names = model.paramNames();
  const vars = model.params();
  const opt = new AdamW(paramInfos(model), { weightDecay: t.weightDecay });
  const losses: number[] = [];
  const sum = new OrderedSum(
    vars.map((v) => v.size),
    microbatches,
    nativeAccumulate(),
  );
  for (let it = 0; it < iterations; it++) {
    sum.reset();
    let loss = 0;
    for (let j = 0; j < microbatches; j++) {
      const b = batchFor(t, corpus, 'train', it, j);
      const x = tf.tensor(b.inputs, [...b.inputShape], 'int32');
      const y = tf.tensor(b.targets, [...b.targetShape], 'int32');
      const r = model.backward(x, null, { targets: y, lossScale: 1 / microbatches });
      loss += r.loss ?? 0;
      sum.add(
        j,
        r.paramGrads.map((g) => viewFloat32(g)),
      );
      r.paramGrads.forEach((g) => g.dispose());
      x.dispose();
      y.dispose();
    }
    losses.push(loss / microbatches);
    const lr = lrAt(
      { peak: t.lr, warmupSteps: t.warmup, totalSteps: Math.max(t.totalIterations, t.warmup + 1) },
      it + 1,
    );
    stepVariables(vars, names, opt, sum, lr);
  }
  const out = new Map(vars.map((v, i) => [names[i], readFloat32(v)]));
  model.dispose();
  return { params: out, losses };
}

/** Mean loss of the model with `params` on `batches` validation microbatches. */
export function validationLoss(t: TrainConfig, params: ReadonlyMap<string, Float32Array>, batches: number): number {
  const corpus = corpusFor(t);
  const spec = modelSpecFor(t, corpus.vocabSize);
  const model: StageModule = buildFullModel(spec);
  const names = model.paramNames();
  model.params().forEach((v, i) => {
    const p = params.get(names[i]);
    if (!p) throw new Error(`validation: parameter ${names[i]} is missing`);
    assignValues(v, p);
  });
  let sum = 0;
  for (let j = 0; j < batches; j++) {
    const b = batchFor(t, corpus, 'val', 0, j);
    const x = tf.tensor(b.inputs, [...b.inputShape], 'int32');
    const y = tf.tensor(b.targets, [...b.targetShape], 'int32');
    const l = model.loss(x, y);
    sum += l.dataSync()[0];
    tf.dispose([x, y, l]);
  }
  model.dispose();
  return sum / batches;
}
