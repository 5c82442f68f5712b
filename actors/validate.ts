// Validation of a run from its event stream (pure): every task ran exactly once per
// stage and iteration, a stage ran one task at a time, and no task started before its
// dependencies — its inputs received, its producers finished. Errors say where.

import {
  PipelineShape, Task, allTasks, backwardPredecessor, forwardPredecessor, formatTask, isLossStage, task,
} from '../policies/task';
import { BatonEvent, ReceiveEvent, TaskEndEvent, TaskStartEvent } from './events';

export class ValidationError extends Error {
  override name = 'ValidationError';
  constructor(readonly problems: string[]) {
    super(`run failed validation (${problems.length} problem${problems.length === 1 ? '' : 's'}):\n  ${problems.slice(0, 20).join('\n  ')}` +
      (problems.length > 20 ? `\n  … ${problems.length - 20} more` : ''));
  }
}

export interface ValidateOptions {
  /** Allowed clock disagreement (ms) when comparing events of different stages (0 on one clock). */
  crossStageSlackMs?: number;
}

type Key = string;
const key = (it: number, stage: number, kind: string, mb: number, chunk: number): Key => `${it}|${stage}|${kind}|${mb}|${chunk}`;

/** Returns the problems found (empty when the run is valid). */
export function validateRun(events: readonly BatonEvent[], shape: PipelineShape, iterations: number, opts: ValidateOptions = {}): string[] {
  const slack = opts.crossStageSlackMs ?? 0;
  const problems: string[] = [];
  const starts = new Map<Key, TaskStartEvent>();
  const ends = new Map<Key, TaskEndEvent>();
  const recvs = new Map<Key, ReceiveEvent>();
  for (const e of events) {
    if (e.type === 'task-start' || e.type === 'task-end') {
      const k = key(e.iteration, e.stage, e.kind, e.mb, e.chunk);
      const map = e.type === 'task-start' ? starts : ends;
      if (map.has(k)) problems.push(`stage ${e.stage}, iteration ${e.iteration}: ${formatTask(e)} ${e.type === 'task-start' ? 'started' : 'ended'} twice`);
      else (map as Map<Key, BatonEvent>).set(k, e);
    } else if (e.type === 'receive' && e.kind !== 'data') {
      recvs.set(key(e.iteration, e.stage, e.kind, e.mb, e.chunk), e);
    }
  }
  const expected = allTasks(shape);
  let expectedCount = 0;
  for (let it = 0; it < iterations; it++) {
    for (let s = 0; s < shape.stages; s++) {
      const spans: { t: Task; start: number; end: number }[] = [];
      for (const t of expected) {
        expectedCount++;
        const where = `stage ${s}, iteration ${it}, ${formatTask(t)}`;
        const st = starts.get(key(it, s, t.kind, t.mb, t.chunk));
        const en = ends.get(key(it, s, t.kind, t.mb, t.chunk));
        if (!st || !en) {
          problems.push(`${where}: ${!st ? 'never started' : 'never ended'}`);
          continue;
        }
        if (en.t < st.t) problems.push(`${where}: ended at ${en.t} before it started at ${st.t}`);
        spans.push({ t, start: st.t, end: en.t });
        problems.push(...dependencyProblems(t, s, it, st.t, shape, ends, recvs, slack).map((p) => `${where}: ${p}`));
      }
      spans.sort((a, b) => a.start - b.start || a.end - b.end);
      for (let i = 1; i < spans.length; i++)
        if (spans[i].start < spans[i - 1].end - 1e-9)
          problems.push(`stage ${s}, iteration ${it}: ${formatTask(spans[i].t)} started at ${spans[i].start} while ${formatTask(spans[i - 1].t)} ran until ${spans[i - 1].end}`);
    }
  }
  if (starts.size > expectedCount) problems.push(`${starts.size - expectedCount} task(s) ran that are not part of the pipeline shape`);
  return problems;
}

function dependencyProblems(
  t: Task, s: number, it: number, start: number, shape: PipelineShape,
  ends: Map<Key, TaskEndEvent>, recvs: Map<Key, ReceiveEvent>, slack: number,
): string[] {
  const out: string[] = [];
  const needEnd = (dep: Task, stage: number, before: number, tol: number, what: string) => {
    const e = ends.get(key(it, stage, dep.kind, dep.mb, dep.chunk));
    if (!e) out.push(`${what} ${formatTask(dep)} at stage ${stage} never ended`);
    else if (e.t > before + tol) out.push(`started at ${before} before ${what} ${formatTask(dep)} at stage ${stage} ended (${e.t})`);
  };
  const needMessage = (kind: 'activation' | 'gradient', producer: Task, from: number) => {
    if (from === s) return needEnd(producer, from, start, 0, 'its producer');
    const r = recvs.get(key(it, s, kind, t.mb, t.chunk));
    if (!r) return out.push(`started without receiving its ${kind} from stage ${from}`);
    if (r.t > start) out.push(`started at ${start} before its ${kind} arrived (${r.t})`);
    needEnd(producer, from, r.t, slack, 'the producer');
  };
  if (t.kind === 'F') {
    const pred = forwardPredecessor(s, t.chunk, shape);
    if (pred) needMessage('activation', task('F', t.mb, pred.chunk), pred.stage);
  } else if (t.kind === 'B') {
    needEnd(task('F', t.mb, t.chunk), s, start, 0, 'its forward');
    if (!isLossStage(s, t.chunk, shape)) {
      const pred = backwardPredecessor(s, t.chunk, shape)!;
      needMessage('gradient', task('B', t.mb, pred.chunk), pred.stage);
    }
  } else {
    needEnd(task('B', t.mb, t.chunk), s, start, 0, 'its backward');
  }
  return out;
}
