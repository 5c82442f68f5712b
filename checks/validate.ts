// Validation of a run from its event stream (pure): every task ran exactly once per
// stage and iteration, a stage ran one task at a time and began an iteration only after
// it had ended the one before, and no task started before its dependencies — its inputs
// (the data at the first virtual stage) received, its producers finished. Errors say where.

import {
  PipelineShape,
  Task,
  allTasks,
  backwardPredecessor,
  forwardPredecessor,
  formatTask,
  isLossStage,
  task,
} from '../policies/task';
import { BatonEvent, ReceiveEvent, SendEvent, TaskEndEvent } from '../stage/events';
import { TaskKey, firstTaskEvents, taskKey } from './task-spans';

export class ValidationError extends Error {
  override name = 'ValidationError';
  constructor(readonly problems: string[]) {
    super(
      `run failed validation (${problems.length} problem${problems.length === 1 ? '' : 's'}):\n  ${problems.slice(0, 20).join('\n  ')}` +
        (problems.length > 20 ? `\n  … ${problems.length - 20} more` : ''),
    );
  }
}

export interface ValidateOptions {
  /** Number of the first iteration (default 0). */
  firstIteration?: number;
  /** All stages share one clock (one process): also check each message arrived after it was sent. */
  sharedClock?: boolean;
  /**
   * The clock each stage's times are on (its machine: processes of one machine share the
   * monotonic clock): a message between two stages of one clock is checked to have arrived
   * after it was sent, even when not all stages share one.
   */
  clockOf?: (stage: number) => string;
}

type Key = string;
/** Where a message is kept: by its receiver (stage), its kind and the task it feeds (microbatch, chunk). */
const messageKey = (it: number, stage: number, kind: string, mb: number, chunk: number): Key =>
  `${it}|${stage}|${kind}|${mb}|${chunk}`;

/** Returns the problems found (empty when the run is valid). */
export function validateRun(
  events: readonly BatonEvent[],
  shape: PipelineShape,
  iterations: number,
  opts: ValidateOptions = {},
): string[] {
  const everyone = opts.sharedClock ?? true;
  const clockOf = opts.clockOf;
  const shared = (a: number, b: number) => everyone || (clockOf !== undefined && clockOf(a) === clockOf(b));
  const problems: string[] = [];
  const { starts, ends } = firstTaskEvents(events, (e) =>
    problems.push(
      `stage ${e.stage}, iteration ${e.iteration}: ${formatTask(e)} ${e.type === 'task-start' ? 'started' : 'ended'} twice`,
    ),
  );
  const recvs = new Map<Key, ReceiveEvent>();
  const sends = new Map<Key, SendEvent>();
  for (const e of events) {
    if (e.type === 'receive') {
      // The first arrival is the one the stage took; a later duplicate it rejected.
      const k = messageKey(e.iteration, e.stage, e.kind, e.mb, e.chunk);
      const seen = recvs.get(k);
      if (!seen || e.t < seen.t) recvs.set(k, e);
    } else if (e.type === 'send') {
      sends.set(messageKey(e.iteration, e.dst, e.kind, e.mb, e.chunk), e);
    }
  }
  const expected = allTasks(shape);
  let expectedCount = 0;
  const first = opts.firstIteration ?? 0;
  // Per stage, the last end of the iteration before: a stage's next iteration begins after
  // its optimizer step, so after every task of the one before has ended there.
  const endOfPrevious: (number | undefined)[] = new Array(shape.stages).fill(undefined);
  for (let it = first; it < first + iterations; it++) {
    for (let s = 0; s < shape.stages; s++) {
      const spans: { t: Task; start: number; end: number }[] = [];
      for (const t of expected) {
        expectedCount++;
        const where = `stage ${s}, iteration ${it}, ${formatTask(t)}`;
        const st = starts.get(taskKey(s, it, t));
        const en = ends.get(taskKey(s, it, t));
        if (!st || !en) {
          problems.push(`${where}: ${!st ? 'never started' : 'never ended'}`);
          continue;
        }
        if (en.t < st.t) problems.push(`${where}: ended at ${en.t} before it started at ${st.t}`);
        spans.push({ t, start: st.t, end: en.t });
        problems.push(
          ...dependencyProblems(t, s, it, st.t, shape, ends, { recvs, sends, shared }).map((p) => `${where}: ${p}`),
        );
      }
      spans.sort((a, b) => a.start - b.start || a.end - b.end);
      const previous = endOfPrevious[s];
      if (spans.length > 0 && previous !== undefined && spans[0].start < previous - 1e-9)
        problems.push(
          `stage ${s}, iteration ${it}: ${formatTask(spans[0].t)} started at ${spans[0].start}, before iteration ${it - 1} ended at this stage (${previous})`,
        );
      for (const x of spans) endOfPrevious[s] = Math.max(endOfPrevious[s] ?? -Infinity, x.end);
      for (let i = 1; i < spans.length; i++)
        if (spans[i].start < spans[i - 1].end - 1e-9)
          problems.push(
            `stage ${s}, iteration ${it}: ${formatTask(spans[i].t)} started at ${spans[i].start} while ${formatTask(spans[i - 1].t)} ran until ${spans[i - 1].end}`,
          );
    }
  }
  if (starts.size > expectedCount)
    problems.push(`${starts.size - expectedCount} task(s) ran that are not part of the pipeline shape`);
  return problems;
}

function dependencyProblems(
  t: Task,
  s: number,
  it: number,
  start: number,
  shape: PipelineShape,
  ends: Map<TaskKey, TaskEndEvent>,
  msgs: { recvs: Map<Key, ReceiveEvent>; sends: Map<Key, SendEvent>; shared: (a: number, b: number) => boolean },
): string[] {
  const out: string[] = [];
  const needEnd = (dep: Task, stage: number, before: number, what: string) => {
    const e = ends.get(taskKey(stage, it, dep));
    if (!e) out.push(`${what} ${formatTask(dep)} at stage ${stage} never ended`);
    else if (e.t > before)
      out.push(`started at ${before} before ${what} ${formatTask(dep)} at stage ${stage} ended (${e.t})`);
  };
  // Every comparison is between events of one stage (one clock), except send -> receive,
  // which is checked only between stages on one clock.
  const needMessage = (kind: 'activation' | 'gradient', producer: Task, from: number) => {
    if (from === s) return needEnd(producer, from, start, 'its producer');
    const r = msgs.recvs.get(messageKey(it, s, kind, t.mb, t.chunk));
    if (!r) return out.push(`started without receiving its ${kind} from stage ${from}`);
    if (r.t > start) out.push(`started at ${start} before its ${kind} arrived (${r.t})`);
    const snd = msgs.sends.get(messageKey(it, s, kind, t.mb, t.chunk));
    if (!snd || snd.stage !== from) return out.push(`received a ${kind} that stage ${from} never sent`);
    const e = ends.get(taskKey(from, it, producer));
    if (!e) out.push(`the producer ${formatTask(producer)} at stage ${from} never ended`);
    else if (snd.t < e.t)
      out.push(`stage ${from} sent its ${kind} at ${snd.t} before the producer ${formatTask(producer)} ended (${e.t})`);
    if (msgs.shared(s, from) && r.t < snd.t)
      out.push(`its ${kind} arrived at ${r.t}, before stage ${from} sent it (${snd.t}) on the same clock`);
  };
  if (t.kind === 'F') {
    const pred = forwardPredecessor(s, t.chunk, shape);
    if (pred) needMessage('activation', task('F', t.mb, pred.chunk), pred.stage);
    else {
      // The first virtual stage's input is the microbatch's data, from the coordinator.
      const r = msgs.recvs.get(messageKey(it, s, 'data', t.mb, t.chunk));
      if (!r) out.push('started without receiving its data');
      else if (r.t > start) out.push(`started at ${start} before its data arrived (${r.t})`);
    }
  } else if (t.kind === 'B') {
    needEnd(task('F', t.mb, t.chunk), s, start, 'its forward');
    if (!isLossStage(s, t.chunk, shape)) {
      const pred = backwardPredecessor(s, t.chunk, shape)!;
      needMessage('gradient', task('B', t.mb, pred.chunk), pred.stage);
    }
  } else {
    needEnd(task('B', t.mb, t.chunk), s, start, 'its backward');
  }
  return out;
}
