// Splits a model into P stages × V chunks of contiguous layers. Virtual stage
// v = chunk * P + stage holds a contiguous range of blocks; the embedding goes to v = 0
// and the final LayerNorm + head to v = P*V - 1. The cut points minimise the largest
// per-virtual-stage time, estimated as forward FLOPs / the relative speed of the physical
// stage that runs it (exact dynamic programme over cut points), so faster nodes of an
// uneven cluster get more layers.
//
// Planning is a pure function over plain data; building the stage modules (which
// allocates variables) is separate, so a node can build only the stages it runs.
//
// Not modelled: memory limits per node and communication cost between stages.

import type { ModelSpec, StageModule } from './stage-module';
import { SequentialStage, SequentialStageOptions } from './sequential-stage';
import { InputError } from '../base/errors';

export interface PartitionOptions {
  /** Pipeline stages P (physical). */
  readonly stages: number;
  /** Chunks per stage V (interleaving); default 1. */
  readonly chunks?: number;
  /** Relative speed of each physical stage (length P); default all 1. */
  readonly weights?: readonly number[];
  /**
   * Stages recompute their forward inside backward (SequentialStage does): every virtual
   * stage but the last then runs its forward twice per microbatch (F, and again in B),
   * the last once (its F output is not needed). Counting backward as two forwards, a
   * non-last stage costs 4/3 of its FLOPs relative to the last. Default false.
   */
  readonly recomputedForward?: boolean;
}

export interface VirtualStagePlan {
  readonly virtualStage: number;
  readonly stage: number;
  readonly chunk: number;
  /** Blocks [start, end) of the model. */
  readonly blockStart: number;
  readonly blockEnd: number;
  readonly hasEmbed: boolean;
  readonly hasHead: boolean;
  /** Layer names in order, e.g. ['embed', 'h0', 'h1']. */
  readonly layers: readonly string[];
  readonly flopsPerSample: number;
  /** flopsPerSample / the stage's relative speed: what the plan balances. */
  readonly weightedCost: number;
}

export interface PartitionPlan {
  readonly model: string;
  readonly stages: number;
  readonly chunks: number;
  readonly weights: readonly number[];
  /** Indexed by virtual stage. */
  readonly virtual: readonly VirtualStagePlan[];
}

export class PartitionError extends InputError {
  override name = 'PartitionError';
}

export function planPartition(spec: ModelSpec, opts: PartitionOptions): PartitionPlan {
  const P = opts.stages;
  const V = opts.chunks ?? 1;
  if (!Number.isInteger(P) || P < 1)
    throw new PartitionError(`partition of ${spec.name}: stages must be a positive integer, got ${P}`);
  if (!Number.isInteger(V) || V < 1)
    throw new PartitionError(`partition of ${spec.name}: chunks must be a positive integer, got ${V}`);
  const weights = opts.weights ?? new Array<number>(P).fill(1);
  if (weights.length !== P)
    throw new PartitionError(
      `partition of ${spec.name}: ${weights.length} stage weights for ${P} stages ([${weights.join(', ')}])`,
    );
  weights.forEach((w, i) => {
    if (!(Number.isFinite(w) && w > 0))
      throw new PartitionError(`partition of ${spec.name}: weight of stage ${i} must be a positive number, got ${w}`);
  });
  const S = P * V;
  const n = spec.blocks.length;
  if (n < S) {
    throw new PartitionError(
      `partition of ${spec.name}: ${n} blocks cannot fill ${S} virtual stages (P=${P} × V=${V}); every virtual stage needs at least one block`,
    );
  }

  const prefix = [0];
  for (const b of spec.blocks) prefix.push(prefix[prefix.length - 1]! + b.flopsPerSample);
  const flops = (v: number, i: number, j: number) =>
    prefix[j]! - prefix[i]! + (v === 0 ? spec.embed.flopsPerSample : 0) + (v === S - 1 ? spec.head.flopsPerSample : 0);
  const passes = (v: number) => (opts.recomputedForward && v < S - 1 ? 4 / 3 : 1);
  const cost = (v: number, i: number, j: number) => (flops(v, i, j) * passes(v)) / weights[v % P]!;

  // best[v][j]: smallest achievable max cost when virtual stages 0..v hold blocks [0, j).
  const best: number[][] = Array.from({ length: S }, () => new Array<number>(n + 1).fill(Infinity));
  const cut: number[][] = Array.from({ length: S }, () => new Array<number>(n + 1).fill(-1));
  for (let j = 1; j <= n - (S - 1); j++) best[0]![j] = cost(0, 0, j);
  for (let v = 1; v < S; v++) {
    for (let j = v + 1; j <= n - (S - 1 - v); j++) {
      for (let i = v; i < j; i++) {
        const m = Math.max(best[v - 1]![i]!, cost(v, i, j));
        if (m < best[v]![j]!) {
          best[v]![j] = m;
          cut[v]![j] = i;
        }
      }
    }
  }
  const bounds = new Array<number>(S + 1);
  bounds[S] = n;
  for (let v = S - 1; v >= 1; v--) bounds[v] = cut[v]![bounds[v + 1]!]!;
  bounds[0] = 0;

  const virtual: VirtualStagePlan[] = [];
  for (let v = 0; v < S; v++) {
    const start = bounds[v]!;
    const end = bounds[v + 1]!;
    const layers = [
      ...(v === 0 ? [spec.embed.name] : []),
      ...spec.blocks.slice(start, end).map((b) => b.name),
      ...(v === S - 1 ? [spec.head.name] : []),
    ];
    virtual.push({
      virtualStage: v,
      stage: v % P,
      chunk: Math.floor(v / P),
      blockStart: start,
      blockEnd: end,
      hasEmbed: v === 0,
      hasHead: v === S - 1,
      layers,
      flopsPerSample: flops(v, start, end),
      weightedCost: cost(v, start, end),
    });
  }
  return { model: spec.name, stages: P, chunks: V, weights: [...weights], virtual };
}

function stageName(spec: ModelSpec, vs: VirtualStagePlan): string {
  const parts: string[] = [];
  if (vs.hasEmbed) parts.push(spec.embed.name);
  if (vs.blockEnd > vs.blockStart) {
    const first = spec.blocks[vs.blockStart]!.name;
    const last = spec.blocks[vs.blockEnd - 1]!.name;
    parts.push(first === last ? first : `${first}..${last}`);
  }
  if (vs.hasHead) parts.push(spec.head.name);
  return `${spec.name}[${parts.join(', ')}]`;
}

/** Builds the stage module of virtual stage v (allocates only its variables). */
export function buildStage(
  spec: ModelSpec,
  plan: PartitionPlan,
  v: number,
  opts?: SequentialStageOptions,
): StageModule {
  const vs = plan.virtual[v];
  if (!vs)
    throw new PartitionError(`partition of ${spec.name}: no virtual stage ${v}; the plan has ${plan.virtual.length}`);
  const layers = [
    ...(vs.hasEmbed ? [spec.embed] : []),
    ...spec.blocks.slice(vs.blockStart, vs.blockEnd),
    ...(vs.hasHead ? [spec.head] : []),
  ];
  return new SequentialStage(stageName(spec, vs), spec, layers, vs.hasEmbed, vs.hasHead, opts);
}

/** All stage modules, indexed by virtual stage. */
export function buildStages(spec: ModelSpec, plan: PartitionPlan, opts?: SequentialStageOptions): StageModule[] {
  return plan.virtual.map((_, v) => buildStage(spec, plan, v, opts));
}

/** The whole model as one stage (the non-pipelined reference). */
export function buildFullModel(spec: ModelSpec, opts?: SequentialStageOptions): StageModule {
  return buildStage(spec, planPartition(spec, { stages: 1 }), 0, opts);
}

/** A table of the plan: one line per virtual stage with its layers and FLOPs. */
export function formatPlan(plan: PartitionPlan): string {
  const total = plan.virtual.reduce((s, v) => s + v.flopsPerSample, 0);
  const lines = [`${plan.model}: P=${plan.stages} V=${plan.chunks} weights=[${plan.weights.join(', ')}]`];
  for (const v of plan.virtual) {
    const share = ((100 * v.flopsPerSample) / total).toFixed(1);
    lines.push(
      `  v${v.virtualStage} (stage ${v.stage}, chunk ${v.chunk}): ${v.layers.join(' ')}  ` +
        `${(v.flopsPerSample / 1e6).toFixed(3)} MFLOP/sample (${share}%)`,
    );
  }
  return lines.join('\n');
}
