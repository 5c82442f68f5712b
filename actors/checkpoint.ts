// Checkpoints of a training job: a directory with meta.json (the next iteration, the
// job config, the parameter checksum) and stage-<s>.cbor per stage (its parameters and
// optimizer moments, CBOR). The launcher writes them from the stages' reports; each
// stage reads its own file when the job resumes.

import * as fs from 'fs';
import * as path from 'path';
import { jsonErrorLine } from '../models/json-error';
import { TrainConfig } from '../models/train-config';
import { decodeValue, encodeValue } from '../transport/codec';
import { StageSnapshot } from './training-compute';

export class CheckpointError extends Error {
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
  config: unknown;
}

const metaPath = (dir: string) => path.join(dir, 'meta.json');
const stagePath = (dir: string, s: number) => path.join(dir, `stage-${s}.cbor`);

export function writeCheckpoint(dir: string, meta: CheckpointMeta, snapshots: StageSnapshot[]): void {
  fs.mkdirSync(dir, { recursive: true });
  snapshots.forEach((snap, s) => {
    const tmp = `${stagePath(dir, s)}.tmp`;
    fs.writeFileSync(tmp, encodeValue(snap));
    fs.renameSync(tmp, stagePath(dir, s));
  });
  fs.writeFileSync(`${metaPath(dir)}.tmp`, JSON.stringify(meta, null, 2));
  fs.renameSync(`${metaPath(dir)}.tmp`, metaPath(dir));
}

export function readCheckpointMeta(dir: string): CheckpointMeta {
  let raw: string;
  try {
    raw = fs.readFileSync(metaPath(dir), 'utf8');
  } catch (err) {
    throw new CheckpointError(`no checkpoint in ${JSON.stringify(dir)}: cannot read meta.json (${(err as Error).message})`, { cause: err });
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
  return m;
}

/** The settings that shape the parameters a checkpoint holds, as its stages saved them. */
const SHAPING = ['model', 'seq', 'layers', 'width', 'heads'] as const;

/**
 * Refuse to resume `dir` into a run laid out or shaped differently (stages, chunks, model,
 * sizes), naming each difference, before any stage loads it. The corpus is not compared:
 * the same file may be named by another path (a vocabulary of another size is caught by
 * the stage, parameter by parameter).
 */
export function checkResumable(dir: string, meta: CheckpointMeta, want: { stages: number; chunks: number; train: Record<(typeof SHAPING)[number], unknown> }): void {
  const saved = (meta.config ?? {}) as { train?: Record<string, unknown> };
  const diffs: string[] = [];
  if (meta.stages !== want.stages) diffs.push(`stages ${meta.stages} (asked ${want.stages})`);
  if (meta.chunks !== want.chunks) diffs.push(`chunks ${meta.chunks} (asked ${want.chunks})`);
  for (const k of SHAPING) {
    const had = saved.train?.[k];
    if (had !== undefined && had !== want.train[k]) diffs.push(`${k} ${JSON.stringify(had)} (asked ${JSON.stringify(want.train[k])})`);
  }
  if (diffs.length > 0) throw new CheckpointError(`cannot resume ${JSON.stringify(dir)} with these settings: it was saved with ${diffs.join(', ')}`);
}

function asFloat32(v: unknown, where: string): Float32Array {
  if (v instanceof Float32Array) return v;
  throw new CheckpointError(`${where}: expected a float32 array`);
}

/** The snapshot a stage resumes from, or undefined for a fresh start. */
export function resumeSnapshot(t: TrainConfig, stage: number): StageSnapshot | undefined {
  if (t.startIteration === 0 || !t.checkpoint) return undefined;
  const file = stagePath(t.checkpoint, stage);
  let v: { params?: Record<string, unknown>; optimizer?: unknown[] };
  try {
    v = decodeValue(fs.readFileSync(file)) as typeof v;
  } catch (err) {
    throw new CheckpointError(`cannot read ${file}: ${(err as Error).message}`, { cause: err });
  }
  if (!v || typeof v.params !== 'object' || !Array.isArray(v.optimizer)) throw new CheckpointError(`${file}: not a stage snapshot`);
  const params: Record<string, Float32Array> = {};
  for (const [k, x] of Object.entries(v.params!)) params[k] = asFloat32(x, `${file}: parameter ${k}`);
  return { params, optimizer: v.optimizer as StageSnapshot['optimizer'] };
}
