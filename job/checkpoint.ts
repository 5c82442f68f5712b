// Checkpoints of a training job: a directory with meta.json (the next iteration, the
// job config, the parameter checksum, the corpus's and every stage file's sha256) and
// stage-<s>-it<next>.cbor per stage (its parameters and optimizer moments, CBOR). The
// launcher writes them from the stages' reports: the new stage files first, beside the
// previous checkpoint's, then meta.json by an atomic rename, then it removes the previous
// files; so an interrupted write leaves the previous checkpoint whole. Every file is
// fsynced before its rename and the directory after (base/durable-file.ts), so this holds
// across a power loss too. A file cut short at any byte is refused: meta.json does not
// parse or lacks its fields, and a stage file's sha256 is not the one meta names. Before a resumed run
// starts it checks every file against meta and the run's settings against the saved ones;
// each stage then reads its own file.

import { createHash } from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { jsonErrorLine } from '../base/json-error';
import { TrainConfig } from '../models/train-config';
import { decodeValue, encodeValue } from '../transport/codec';
import { StageSnapshot } from '../compute/chunk-optimizer';
import { snapshotProblem } from '../checks/report-body';
import { RegularFileError, readRegularFile } from '../base/regular-file';
import { InputError } from '../base/errors';
import { syncDirectory, writeAndSync, writeFileDurably } from '../base/durable-file';

export class CheckpointError extends InputError {
  override name = 'CheckpointError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

export interface CheckpointMeta {
  /** The iteration a resumed run starts with. */
  nextIteration: number;
  stages: number;
  chunks: number;
  checksum: string;
  /** sha256 of the corpus text the run trained on. */
  corpus: string;
  /** sha256 of each stage file, by file name. */
  files: Record<string, string>;
  /** The tfjs backend the run computed with (absent from checkpoints of earlier Batons). */
  backend?: string;
  /** Its kernel set (models/native-kernels.ts kernelSetName; absent from checkpoints of earlier Batons). */
  kernels?: string;
  config: unknown;
}

const sha256 = (data: string | Uint8Array) => createHash('sha256').update(data).digest('hex');

/** The corpus's fingerprint in a checkpoint. */
export const corpusDigest = (text: string): string => sha256(text);

const metaPath = (dir: string) => path.join(dir, 'meta.json');
const stageFile = (s: number, nextIteration: number) => `stage-${s}-it${nextIteration}.cbor`;
const stagePath = (dir: string, s: number, nextIteration: number) => path.join(dir, stageFile(s, nextIteration));
const STAGE_FILE_RE = /^stage-\d+-it\d+\.cbor(\.tmp)?$/;

/** Whether `dir` holds a checkpoint (its meta.json), so a new run would overwrite it. */
export function hasCheckpoint(dir: string): boolean {
  return fs.existsSync(metaPath(dir));
}

export function writeCheckpoint(dir: string, meta: Omit<CheckpointMeta, 'files'>, snapshots: StageSnapshot[]): void {
  fs.mkdirSync(dir, { recursive: true });
  const files: Record<string, string> = {};
  snapshots.forEach((snap, s) => {
    const file = stagePath(dir, s, meta.nextIteration);
    const bytes = encodeValue(snap);
    files[path.basename(file)] = sha256(bytes);
    writeAndSync(`${file}.tmp`, bytes);
    fs.renameSync(`${file}.tmp`, file);
  });
  // The stage files' renames are durable before meta.json names them.
  syncDirectory(dir);
  writeFileDurably(metaPath(dir), JSON.stringify({ ...meta, files }, null, 2));
  // Only now is the previous checkpoint's set of files no longer the one meta names.
  for (const f of fs.readdirSync(dir))
    if (STAGE_FILE_RE.test(f) && !(f in files)) fs.rmSync(path.join(dir, f), { force: true });
}

export function readCheckpointMeta(dir: string): CheckpointMeta {
  let raw: string;
  try {
    raw = readRegularFile(metaPath(dir), MAX_META_BYTES).toString('utf8');
  } catch (err) {
    if (!(err instanceof RegularFileError)) throw err;
    throw new CheckpointError(`no checkpoint in ${JSON.stringify(dir)}: its meta.json ${err.message}`, { cause: err });
  }
  let m: CheckpointMeta;
  try {
    m = JSON.parse(raw) as CheckpointMeta;
  } catch (err) {
    throw new CheckpointError(`${metaPath(dir)}: not valid JSON (${jsonErrorLine(err)})`, { cause: err });
  }
  if (typeof m !== 'object' || m === null) throw new CheckpointError(`${metaPath(dir)}: not a checkpoint description`);
  if (!Number.isInteger(m.nextIteration) || m.nextIteration < 0 || typeof m.checksum !== 'string')
    throw new CheckpointError(`${metaPath(dir)}: malformed (nextIteration ${JSON.stringify(m.nextIteration)})`);
  if (typeof m.corpus !== 'string' || typeof m.files !== 'object' || m.files === null)
    throw new CheckpointError(
      `${metaPath(dir)}: no corpus or stage-file digests (written by an older Baton?); it cannot be checked, so it is not resumed`,
    );
  return m;
}

/** Settings a resumed run must share with the saved one to continue it exactly. */
const SAME = ['model', 'seq', 'layers', 'width', 'microbatchSize', 'seed', 'lr', 'warmup', 'weightDecay'] as const;
const FLAG_OF: Record<string, string> = {
  microbatchSize: 'microbatch-size',
  weightDecay: 'weight decay',
  totalIterations: 'iterations',
};

/**
 * Refuse to resume `dir` into a run that would not continue it exactly (stages, chunks,
 * microbatches, the model, the data's order and the optimizer's schedule), naming each
 * difference, before any stage loads it. --iterations may grow: that extends the run, and
 * the learning-rate schedule's horizon becomes the new count from the resume point on. The corpus is
 * compared by content (the same file may be named by another path), in checkFiles.
 */
export function checkResumable(
  dir: string,
  meta: CheckpointMeta,
  want: { stages: number; chunks: number; microbatches: number; train: TrainConfig },
): void {
  const saved = (meta.config ?? {}) as { microbatches?: unknown; train?: Record<string, unknown> };
  const diffs: string[] = [];
  if (meta.stages !== want.stages) diffs.push(`stages ${meta.stages} (asked ${want.stages})`);
  if (meta.chunks !== want.chunks) diffs.push(`chunks ${meta.chunks} (asked ${want.chunks})`);
  if (saved.microbatches !== want.microbatches)
    diffs.push(`microbatches ${JSON.stringify(saved.microbatches)} (asked ${want.microbatches})`);
  const keys: readonly string[] = want.train.model === 'gpt' ? [...SAME, 'heads'] : SAME;
  for (const k of keys) {
    const had = saved.train?.[k];
    const asked = (want.train as unknown as Record<string, unknown>)[k];
    if (had !== asked) diffs.push(`${FLAG_OF[k] ?? k} ${JSON.stringify(had)} (asked ${JSON.stringify(asked)})`);
  }
  // A larger horizon extends the run (the schedule stretches from here on); a smaller one would cut it.
  const total = saved.train?.totalIterations;
  if (typeof total !== 'number' || want.train.totalIterations < total)
    diffs.push(`iterations ${JSON.stringify(total)} (asked ${want.train.totalIterations}, which is fewer)`);
  if (diffs.length > 0)
    throw new CheckpointError(
      `cannot resume ${JSON.stringify(dir)} with these settings: it was saved with ${diffs.join(', ')}; a resumed run continues the saved one exactly, so give its settings`,
    );
}

/**
 * Check the checkpoint's files before a resumed run: every stage file is the one meta
 * names (a crash between writing the stage files and meta, or a file from another
 * checkpoint, shows here), the corpus is the one it trained on, every optimizer has taken
 * nextIteration steps, and the parameters hash to meta's checksum (`checksumOf` hashes
 * them in the model's order).
 */
export function checkFiles(
  dir: string,
  meta: CheckpointMeta,
  o: { corpus: string; checksumOf: (params: Map<string, Float32Array>) => string },
): void {
  if (o.corpus !== meta.corpus)
    throw new CheckpointError(
      `cannot resume ${JSON.stringify(dir)}: it was trained on another corpus (sha256 ${meta.corpus.slice(0, 12)}…, this one ${o.corpus.slice(0, 12)}…)`,
    );
  const params = new Map<string, Float32Array>();
  for (let s = 0; s < meta.stages; s++) {
    const file = stagePath(dir, s, meta.nextIteration);
    const name = path.basename(file);
    const bytes = readStageFile(file);
    if (meta.files[name] !== sha256(bytes))
      throw new CheckpointError(
        `${file} is not the file meta.json was written with (its sha256 differs): an interrupted write, or a file from another checkpoint`,
      );
    const snap = decodeSnapshot(bytes, file);
    for (const [i, st] of snap.optimizer.entries()) {
      const step = (st as { step?: unknown } | undefined)?.step;
      if (step !== meta.nextIteration)
        throw new CheckpointError(
          `${file}: chunk ${i}'s optimizer took ${JSON.stringify(step)} steps, but meta.json says the run is at iteration ${meta.nextIteration}`,
        );
    }
    for (const [k, p] of Object.entries(snap.params)) params.set(k, p);
  }
  let sum: string;
  try {
    sum = o.checksumOf(params);
  } catch (err) {
    throw new CheckpointError(
      `${dir}: the stage files do not hold this model's parameters (${(err as Error).message})`,
      { cause: err },
    );
  }
  if (sum !== meta.checksum)
    throw new CheckpointError(
      `${dir}: the parameters in the stage files hash to ${sum.slice(0, 16)}, meta.json says ${meta.checksum.slice(0, 16)}`,
    );
}

function decodeSnapshot(bytes: Uint8Array, file: string): StageSnapshot {
  let v: { params?: Record<string, unknown>; optimizer?: unknown[] };
  try {
    v = decodeValue(bytes) as typeof v;
  } catch (err) {
    throw new CheckpointError(`cannot read ${file}: ${(err as Error).message}`, { cause: err });
  }
  const problem = snapshotProblem(v);
  if (problem) throw new CheckpointError(`${file}: not a stage snapshot (${problem})`);
  return { params: v.params as StageSnapshot['params'], optimizer: v.optimizer as StageSnapshot['optimizer'] };
}

/** The snapshot a stage resumes from, or undefined for a fresh start. */
export function resumeSnapshot(t: TrainConfig, stage: number): StageSnapshot | undefined {
  if (t.startIteration === 0 || !t.checkpoint) return undefined;
  const file = stagePath(t.checkpoint, stage, t.startIteration);
  return decodeSnapshot(readStageFile(file), file);
}

/** Bounds on what a resumed run reads: meta.json is a page of JSON; a stage file holds parameters and two moments. */
const MAX_META_BYTES = 16 * 1024 * 1024;
const MAX_STAGE_FILE_BYTES = 2 ** 31 - 1;

function readStageFile(file: string): Buffer {
  try {
    return readRegularFile(file, MAX_STAGE_FILE_BYTES);
  } catch (err) {
    if (!(err instanceof RegularFileError)) throw err;
    throw new CheckpointError(`stage file ${file} ${err.message}`, { cause: err });
  }
}
