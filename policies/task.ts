// The task IR: what a stage executes, and the dependency rules between tasks.
// Pure data and functions; nothing here knows about actors, clocks or tensors.
//
// A task is (kind, microbatch, chunk). Its text form follows PyTorch's pipelining IR
// without the stage prefix: `F3`, `B3`, `W3`, and `F3@1` for chunk 1 (chunk 0 is
// written without the suffix). Kind B is the whole backward, or the input-gradient
// part only when the pipeline splits backward into B and W.
import { InputError } from '../base/errors';

export type TaskKind = 'F' | 'B' | 'W';

export interface Task {
  readonly kind: TaskKind;
  readonly mb: number;
  readonly chunk: number;
}

/** P stages x V chunks (virtual stages) with M microbatches per iteration. */
export interface PipelineShape {
  readonly stages: number;
  readonly chunks: number;
  readonly microbatches: number;
  /** True when backward is split into B (input gradient) and W (weight gradient). */
  readonly splitBackward: boolean;
}

export class TaskParseError extends Error {
  override name = 'TaskParseError';
  constructor(readonly input: string) {
    super(`cannot parse task ${JSON.stringify(input)}: expected <F|B|W><microbatch>[@<chunk>], e.g. F3, B3, W3, F3@1`);
  }
}

export class ShapeError extends InputError {
  override name = 'ShapeError';
}

const TASK_RE = /^([FBW])(\d+)(?:@(\d+))?$/;

export function task(kind: TaskKind, mb: number, chunk = 0): Task {
  return { kind, mb, chunk };
}

export function formatTask(t: Task): string {
  return t.chunk === 0 ? `${t.kind}${t.mb}` : `${t.kind}${t.mb}@${t.chunk}`;
}

export function parseTask(text: string): Task {
  const m = TASK_RE.exec(text);
  if (!m) throw new TaskParseError(text);
  return task(m[1] as TaskKind, Number(m[2]), m[3] === undefined ? 0 : Number(m[3]));
}

export function sameTask(a: Task, b: Task): boolean {
  return a.kind === b.kind && a.mb === b.mb && a.chunk === b.chunk;
}

/** Dense index of a task within one stage and iteration: [kind][chunk][mb]. */
export function taskIndex(t: Task, shape: PipelineShape): number {
  const k = t.kind === 'F' ? 0 : t.kind === 'B' ? 1 : 2;
  return (k * shape.chunks + t.chunk) * shape.microbatches + t.mb;
}

export function kindsOf(shape: PipelineShape): TaskKind[] {
  return shape.splitBackward ? ['F', 'B', 'W'] : ['F', 'B'];
}

/** Every task one stage runs in one iteration, in (kind, chunk, mb) order. */
export function allTasks(shape: PipelineShape): Task[] {
  const out: Task[] = [];
  for (const kind of kindsOf(shape))
    for (let c = 0; c < shape.chunks; c++) for (let j = 0; j < shape.microbatches; j++) out.push(task(kind, j, c));
  return out;
}

/**
 * What keeps `x` from being a task of one stage of `shape` (a kind the shape has, a
 * microbatch in 0..M-1, a chunk in 0..V-1), or null when it is one. A policy's pick is
 * checked with this before anything is looked up by it: a dense index of an
 * out-of-range task is another task's index.
 */
export function taskProblem(x: unknown, shape: PipelineShape): string | null {
  if (typeof x !== 'object' || x === null) return 'not a task object';
  const t = x as Record<string, unknown>;
  const kinds = kindsOf(shape);
  if (!(kinds as unknown[]).includes(t.kind)) return `kind must be ${kinds.join(', ')}`;
  const inRange = (v: unknown, n: number) => Number.isInteger(v) && (v as number) >= 0 && (v as number) < n;
  if (!inRange(t.mb, shape.microbatches)) return `mb must be an integer from 0 to ${shape.microbatches - 1}`;
  if (!inRange(t.chunk, shape.chunks)) return `chunk must be an integer from 0 to ${shape.chunks - 1}`;
  return null;
}

export function validateShape(shape: PipelineShape): void {
  const { stages, chunks, microbatches } = shape;
  const bad = (what: string, v: number) =>
    new ShapeError(`${what} must be a positive integer, got ${JSON.stringify(v)}`);
  if (!Number.isInteger(stages) || stages < 1) throw bad('stages', stages);
  if (!Number.isInteger(chunks) || chunks < 1) throw bad('chunks', chunks);
  if (!Number.isInteger(microbatches) || microbatches < 1) throw bad('microbatches', microbatches);
  const over = (what: string, v: number, max: number) => new ShapeError(`${what} must be at most ${max}, got ${v}`);
  if (stages > SHAPE_LIMITS.stages) throw over('stages', stages, SHAPE_LIMITS.stages);
  if (chunks > SHAPE_LIMITS.chunks) throw over('chunks', chunks, SHAPE_LIMITS.chunks);
  if (chunks * microbatches > SHAPE_LIMITS.perStage)
    throw over('chunks × microbatches (the tasks of a stage per kind)', chunks * microbatches, SHAPE_LIMITS.perStage);
  if (stages * chunks * microbatches > SHAPE_LIMITS.total)
    throw over('stages × chunks × microbatches', stages * chunks * microbatches, SHAPE_LIMITS.total);
}

/** Bounds on a pipeline's shape: every stage keeps per-task state, and a run keeps an
 * event per task of every iteration (about 2 KB each), so a shape a peer or a typo makes
 * huge is refused up front instead of exhausting memory. `run` bounds stages × chunks ×
 * microbatches × iterations (checked with the iterations, in planJob). */
export const SHAPE_LIMITS = { stages: 1024, chunks: 64, perStage: 262_144, total: 1_048_576, run: 2_097_152 } as const;

// Virtual stages: chunk c of physical stage s is virtual stage c*P + s. A microbatch's
// forward path visits virtual stages 0..P*V-1 (physical 0..P-1 once per chunk); the
// loss is computed at the last virtual stage (stage P-1, chunk V-1).

export function virtualStage(stage: number, chunk: number, shape: PipelineShape): number {
  return chunk * shape.stages + stage;
}

/** A chunk on a stage: where a task's input comes from or its output goes. */
export interface StageChunk {
  readonly stage: number;
  readonly chunk: number;
}

export function fromVirtual(v: number, shape: PipelineShape): StageChunk {
  return { stage: v % shape.stages, chunk: Math.floor(v / shape.stages) };
}

export function isLossStage(stage: number, chunk: number, shape: PipelineShape): boolean {
  return stage === shape.stages - 1 && chunk === shape.chunks - 1;
}

/** Where the output of F(mb, chunk) at `stage` goes, or null at the loss stage. */
export function forwardSuccessor(stage: number, chunk: number, shape: PipelineShape): StageChunk | null {
  const v = virtualStage(stage, chunk, shape);
  return v + 1 >= shape.stages * shape.chunks ? null : fromVirtual(v + 1, shape);
}

/** Where the input gradient of B(mb, chunk) at `stage` goes, or null at the first virtual stage. */
export function backwardSuccessor(stage: number, chunk: number, shape: PipelineShape): StageChunk | null {
  const v = virtualStage(stage, chunk, shape);
  return v === 0 ? null : fromVirtual(v - 1, shape);
}

/** The (stage, chunk) whose F output is the input of F(mb, chunk) at `stage`; null for the data. */
export function forwardPredecessor(stage: number, chunk: number, shape: PipelineShape): StageChunk | null {
  return backwardSuccessor(stage, chunk, shape);
}

/** The (stage, chunk) whose B output is the gradient input of B(mb, chunk); null at the loss stage. */
export function backwardPredecessor(stage: number, chunk: number, shape: PipelineShape): StageChunk | null {
  return forwardSuccessor(stage, chunk, shape);
}

/**
 * The other stages `stage` sends to over all its chunks: activations where its forwards'
 * outputs go (forwardSuccessor), gradients where its backwards' input gradients go
 * (backwardSuccessor). A hand-on to a chunk of its own stays in the stage. With V = 1 these
 * are its neighbours; with V > 1 the last stage also feeds stage 0 its next chunk, and stage
 * 0 returns that chunk's gradient to the last stage. What a stage process's NATS user may
 * publish is derived from this (job/nats-users.ts).
 */
export function stageRoutes(
  stage: number,
  shape: Pick<PipelineShape, 'stages' | 'chunks'>,
): { activation: number[]; gradient: number[] } {
  const full: PipelineShape = { ...shape, microbatches: 1, splitBackward: false };
  const to = (next: (s: number, c: number, sh: PipelineShape) => StageChunk | null): number[] => {
    const out = new Set<number>();
    for (let c = 0; c < shape.chunks; c++) {
      const d = next(stage, c, full);
      if (d !== null && d.stage !== stage) out.add(d.stage);
    }
    return [...out].sort((a, b) => a - b);
  };
  return { activation: to(forwardSuccessor), gradient: to(backwardSuccessor) };
}
