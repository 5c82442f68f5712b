// Emulated durations: how long a task occupies its stage and how long its message takes,
// for one workload profile, pipeline shape, jitter mode and seed.
//
// Partition: the profile's `split` stack (L layer units; times P for per-stage depth) is
// cut into P*V equal-length pieces, virtual stage v owning [v L/(PV), (v+1) L/(PV)), or,
// given stage weights (a speed-aware partition), cut so that every virtual stage's forward
// ms, its `first`/`last` groups included, over the weight of the physical stage it runs on
// is the same (a stage whose end groups alone exceed that gets no piece of the stack). A
// node's speed s makes its stage's compute take 1/s as long. A
// piece may hold a fraction of a layer, standing for a finer partition (sub-layers), so
// every (P, V) is meaningful even when P*V exceeds the layer count. `first` groups are
// added to virtual stage 0, `last` groups to virtual stage P*V-1.
//
// Realized value = base × lognormal multiplier drawn from a key (seed, iteration, stage,
// event, microbatch, chunk), so the same seed gives the same durations in any call order.
// Communication is latency + bytes / bandwidth for the whole message, jittered as one;
// links have no contention (two messages on one link do not slow each other).

import {
  PipelineShape,
  Task,
  TaskKind,
  backwardSuccessor,
  forwardSuccessor,
  formatTask,
  validateShape,
  virtualStage,
} from '../policies/task';
import { JitterMode, jitterSigmas, lognormalMultiplier } from './jitter';
import { DrawEvent, keyedNormal } from './keyed-random';
import { WorkloadProfile } from './profile';

/** The longest message delay a draw may give: what the codec lets a message hold (transport/codec.ts MAX_COMM_MS). */
export const MAX_COMM_DRAW_MS = 3_600_000;

export class DurationError extends Error {
  override name = 'DurationError';
}

export interface VirtualStageCosts {
  /** Unjittered forward ms of each virtual stage (index c*P + s). */
  readonly forwardMs: readonly number[];
  /** Bytes crossing the cut after each virtual stage (the last entry is 0: nothing after the loss). */
  readonly cutBytes: readonly number[];
}

/** Forward cost and outgoing message size of every virtual stage for P stages and V chunks (pieces weighted by `weights`, one per physical stage). */
export function partitionProfile(
  profile: WorkloadProfile,
  stages: number,
  chunks: number,
  weights?: readonly number[],
): VirtualStageCosts {
  const n = stages * chunks;
  const mult = profile.depth === 'per-stage' ? stages : 1;
  const stack: { start: number; end: number; ms: number; bytes: number }[] = [];
  let pos = 0;
  for (const g of profile.layers) {
    if (g.placement !== 'split') continue;
    const len = g.count * mult;
    stack.push({
      start: pos,
      end: pos + len,
      ms: g.forwardMs,
      bytes: g.activationBytes ?? profile.communication.activationBytes,
    });
    pos += len;
  }
  const total = pos;
  const eps = 1e-9 * total;
  const bounds = weights
    ? balancedBounds(profile, stack, n, (v) => weights[v % stages])
    : Array.from({ length: n + 1 }, (_, v) => (v * total) / n);
  const forwardMs: number[] = [];
  const cutBytes: number[] = [];
  // The stack is in order and the cuts advance, so each walks forward once: O(n + groups).
  let from = 0;
  let cut = 0;
  for (let v = 0; v < n; v++) {
    const a = bounds[v];
    const b = bounds[v + 1];
    while (from < stack.length - 1 && stack[from].end <= a) from++;
    let ms = 0;
    for (let j = from; j < stack.length && stack[j].start < b; j++)
      ms += Math.max(0, Math.min(b, stack[j].end) - Math.max(a, stack[j].start)) * stack[j].ms;
    if (v === 0 || v === n - 1) {
      for (const g of profile.layers) {
        if (g.placement === 'first' && v === 0) ms += g.count * g.forwardMs;
        if (g.placement === 'last' && v === n - 1) ms += g.count * g.forwardMs;
      }
    }
    forwardMs.push(ms);
    // The cut at b carries the output of the group that ends at or after b.
    while (cut < stack.length - 1 && stack[cut].end < b - eps) cut++;
    cutBytes.push(v === n - 1 ? 0 : stack[cut].bytes);
  }
  return { forwardMs, cutBytes };
}

/** Cut points in layer units so that (stack ms + end groups' ms) / weight is equal for every virtual stage. */
function balancedBounds(
  profile: WorkloadProfile,
  stack: readonly { start: number; end: number; ms: number }[],
  n: number,
  weight: (v: number) => number,
): number[] {
  const ends = (placement: 'first' | 'last') =>
    profile.layers.filter((g) => g.placement === placement).reduce((a, g) => a + g.count * g.forwardMs, 0);
  const extra = (v: number) => (v === 0 ? ends('first') : 0) + (v === n - 1 ? ends('last') : 0);
  const stackMs = stack.reduce((a, g) => a + (g.end - g.start) * g.ms, 0);
  const share = (t: number, v: number) => Math.max(0, t * weight(v) - extra(v));
  const filled = (t: number) => Array.from({ length: n }, (_, v) => share(t, v)).reduce((a, b) => a + b, 0);
  // The time per unit weight that the stack fills exactly: filled() rises with t.
  let lo = 0;
  let hi = 1;
  while (filled(hi) < stackMs) hi *= 2;
  for (let k = 0; k < 100; k++) {
    const mid = (lo + hi) / 2;
    if (filled(mid) < stackMs) lo = mid;
    else hi = mid;
  }
  // Stack ms before each cut, turned into a position along the stack.
  const at = (ms: number): number => {
    for (const g of stack) {
      const gms = (g.end - g.start) * g.ms;
      if (ms <= gms || g === stack[stack.length - 1])
        return g.start + (g.ms > 0 ? Math.min(ms / g.ms, g.end - g.start) : 0);
      ms -= gms;
    }
    return 0;
  };
  const bounds = [0];
  let ms = 0;
  for (let v = 0; v < n - 1; v++) bounds.push(at((ms += share(hi, v))));
  bounds.push(stack.length > 0 ? stack[stack.length - 1].end : 0);
  return bounds;
}

export interface DurationModelOptions {
  readonly profile: WorkloadProfile;
  readonly shape: PipelineShape;
  readonly jitter: JitterMode;
  /** Multiplies the jitter's target spreads; default 1, 0 turns jitter off. */
  readonly jitterScale?: number;
  readonly seed: number;
  /** Relative speed of each physical stage's node: its compute takes 1/speed as long (default all 1). */
  readonly stageSpeeds?: readonly number[];
  /** Weights of a speed-aware partition, one per physical stage (default: equal pieces). */
  readonly partitionWeights?: readonly number[];
}

export interface DurationModel {
  readonly shape: PipelineShape;
  readonly profile: WorkloadProfile;
  /** Realized ms that `t` occupies `stage` in `iteration`. */
  compute(iteration: number, stage: number, t: Task): number;
  /** Realized ms from the end of `t` (F or B) at `stage` until its message is at the destination. */
  comm(iteration: number, stage: number, t: Task): number;
  /** Bytes of the activation (F) or gradient (B) message `t` sends from `stage`. */
  messageBytes(stage: number, t: Task): number;
  /** Unjittered compute ms. */
  base(stage: number, kind: TaskKind, chunk: number): number;
  /** Unjittered communication ms of the message `t` sends from `stage`. */
  baseComm(stage: number, t: Task): number;
}

export function makeDurationModel(opts: DurationModelOptions): DurationModel {
  const { profile, shape, seed } = opts;
  validateShape(shape);
  if (!Number.isSafeInteger(seed)) throw new DurationError(`seed must be a safe integer, got ${JSON.stringify(seed)}`);
  const sigma = jitterSigmas(opts.jitter, opts.jitterScale ?? 1);
  for (const [what, xs] of [
    ['stage speeds', opts.stageSpeeds],
    ['partition weights', opts.partitionWeights],
  ] as const)
    if (xs && (xs.length !== shape.stages || !xs.every((x) => Number.isFinite(x) && x > 0)))
      throw new DurationError(`${what} must be ${shape.stages} positive numbers, got ${JSON.stringify(xs)}`);
  const { forwardMs, cutBytes } = partitionProfile(profile, shape.stages, shape.chunks, opts.partitionWeights);
  const { latencyMs, bandwidthGBps } = profile.communication;
  const atSpeed = baseComputeMs(profile, shape, forwardMs);
  const speeds = opts.stageSpeeds;
  const base: DurationModel['base'] = speeds ? (s, k, c) => atSpeed(s, k, c) / speeds[s] : atSpeed;
  const messageBytes = messageBytesOf(shape, cutBytes);

  const baseComm = (stage: number, t: Task): number => {
    const bytes = messageBytes(stage, t);
    return latencyMs === 0 && bytes === 0 ? 0 : latencyMs + bytes / (bandwidthGBps * 1e6);
  };

  // A lognormal draw is unbounded: a heavy profile under a large --jitter-scale can draw
  // a message delay of hours, more than a message may be held; say so where it is drawn.
  const boundedComm = (stage: number, t: Task, ms: number): number => {
    if (!(ms <= MAX_COMM_DRAW_MS))
      throw new DurationError(
        `${where(stage, t)}: drew a communication time of ${ms.toFixed(0)} ms, over the ${MAX_COMM_DRAW_MS / 3_600_000} h a message may be held; lower --jitter-scale (now ${opts.jitterScale ?? 1}) or the profile's communication costs`,
      );
    return ms;
  };

  const draw = (sig: number, iteration: number, stage: number, event: DrawEvent, t: Task) =>
    sig === 0 ? 1 : lognormalMultiplier(sig, keyedNormal({ seed, iteration, stage, event, mb: t.mb, chunk: t.chunk }));

  return {
    shape,
    profile,
    base,
    baseComm,
    messageBytes,
    compute(iteration, stage, t) {
      return base(stage, t.kind, t.chunk) * draw(sigma.compute, iteration, stage, t.kind, t);
    },
    comm(iteration, stage, t) {
      const ms = baseComm(stage, t);
      return ms === 0
        ? 0
        : boundedComm(
            stage,
            t,
            ms * draw(sigma.communication, iteration, stage, t.kind === 'F' ? 'send-activation' : 'send-gradient', t),
          );
    },
  };
}

const where = (stage: number, t: Task) => `stage ${stage}, ${formatTask(t)}`;

function checkPlace(shape: PipelineShape, stage: number, chunk: number, what: () => string): void {
  if (!Number.isInteger(stage) || stage < 0 || stage >= shape.stages)
    throw new DurationError(
      `${what()}: stage must be an integer in 0..${shape.stages - 1}, got ${JSON.stringify(stage)}`,
    );
  if (!Number.isInteger(chunk) || chunk < 0 || chunk >= shape.chunks)
    throw new DurationError(
      `${what()}: chunk must be an integer in 0..${shape.chunks - 1}, got ${JSON.stringify(chunk)}`,
    );
}

/** The model's `base`: unjittered compute ms of an F, B or W task at (stage, chunk). */
function baseComputeMs(
  profile: WorkloadProfile,
  shape: PipelineShape,
  forwardMs: readonly number[],
): DurationModel['base'] {
  const bwFraction = shape.splitBackward ? 1 - profile.weightGradFraction : 1;
  return (stage, kind, chunk) => {
    checkPlace(shape, stage, chunk, () => `base(${stage}, ${kind}, ${chunk})`);
    const f = forwardMs[virtualStage(stage, chunk, shape)];
    switch (kind) {
      case 'F':
        return f;
      case 'B':
        return f * profile.backwardRatio * bwFraction;
      case 'W':
        if (!shape.splitBackward)
          throw new DurationError(
            `stage ${stage}: W tasks exist only when the backward is split (splitBackward is false)`,
          );
        return f * profile.backwardRatio * profile.weightGradFraction;
      default:
        throw new DurationError(`stage ${stage}: task kind must be F, B or W, got ${JSON.stringify(kind)}`);
    }
  };
}

/** The model's `messageBytes`: the activation (F) or gradient (B) bytes a task sends from a stage. */
function messageBytesOf(shape: PipelineShape, cutBytes: readonly number[]): DurationModel['messageBytes'] {
  return (stage, t) => {
    checkPlace(shape, stage, t.chunk, () => where(stage, t));
    if (t.kind === 'F') {
      if (!forwardSuccessor(stage, t.chunk, shape))
        throw new DurationError(`${where(stage, t)}: the loss stage sends no activation`);
      return cutBytes[virtualStage(stage, t.chunk, shape)];
    }
    if (t.kind === 'B') {
      if (!backwardSuccessor(stage, t.chunk, shape))
        throw new DurationError(`${where(stage, t)}: the first virtual stage sends no gradient`);
      return cutBytes[virtualStage(stage, t.chunk, shape) - 1];
    }
    throw new DurationError(`${where(stage, t)}: only F and B tasks send messages`);
  };
}
