import { strict as assert } from 'assert';
import { firstTaskEvents, pairTaskEvents, taskKey } from '../checks/task-spans';
import { task } from '../policies/task';
import { BatonEvent, TaskEndEvent, TaskStartEvent } from '../stage/events';

const start = (t: number, kind: 'F' | 'B' | 'W', mb: number, chunk = 0, stage = 0, iteration = 0): TaskStartEvent => ({
  type: 'task-start',
  t,
  stage,
  iteration,
  kind,
  mb,
  chunk,
  inflight: 0,
  backpressure: false,
});
const end = (t: number, kind: 'F' | 'B' | 'W', mb: number, chunk = 0, stage = 0, iteration = 0): TaskEndEvent => ({
  type: 'task-end',
  t,
  stage,
  iteration,
  kind,
  mb,
  chunk,
});
/** A span as text: `F0@1 0-2` (the chunk always shown, to tell chunks apart). */
const text = (s: { start: TaskStartEvent; end: TaskEndEvent }) =>
  `${s.end.kind}${s.end.mb}@${s.end.chunk} ${s.start.t}-${s.end.t}`;

describe('task spans', () => {
  it('keys a task by stage, iteration, kind, microbatch and chunk, each telling tasks apart', () => {
    const keys = [
      taskKey(0, 0, task('F', 1, 0)),
      taskKey(1, 0, task('F', 1, 0)),
      taskKey(0, 1, task('F', 1, 0)),
      taskKey(0, 0, task('B', 1, 0)),
      taskKey(0, 0, task('F', 2, 0)),
      taskKey(0, 0, task('F', 1, 1)),
    ];
    assert.equal(new Set(keys).size, keys.length);
    assert.equal(taskKey(2, 3, end(0, 'W', 4, 1)), taskKey(2, 3, task('W', 4, 1)));
  });

  it('pairs each end with the open start of its task, in the order of the ends, and leaves other events out', () => {
    const events: BatonEvent[] = [
      start(0, 'F', 0),
      start(1, 'F', 0, 0, 1),
      { type: 'wait', t: 1, stage: 0, iteration: 0, ms: 1, reason: 'nothing-ready' },
      start(2, 'F', 0, 1),
      end(3, 'F', 0, 1),
      end(4, 'F', 0),
      end(5, 'F', 0, 0, 1),
    ];
    const { spans, open } = pairTaskEvents(events);
    assert.deepEqual(spans.map(text), ['F0@1 2-3', 'F0@0 0-4', 'F0@0 1-5']);
    assert.deepEqual(open, []);
  });

  it('reports a restart of an open task and lets the later start stand; an end without a start makes no span', () => {
    const seen: string[] = [];
    const { spans, open } = pairTaskEvents(
      [start(0, 'F', 0), start(1, 'F', 0), end(2, 'F', 0), end(3, 'F', 0), start(4, 'B', 0)],
      {
        restarted: (first, again) => seen.push(`restarted ${first.t} ${again.t}`),
        unstarted: (e) => seen.push(`unstarted ${e.t}`),
      },
    );
    assert.deepEqual(seen, ['restarted 0 1', 'unstarted 3']);
    assert.deepEqual(spans.map(text), ['F0@0 1-2']);
    assert.deepEqual(
      open.map((e) => e.t),
      [4],
    );
  });

  it('lists the starts never ended in the order their tasks were opened', () => {
    const { open } = pairTaskEvents([start(0, 'F', 1), start(1, 'F', 2), start(2, 'F', 1), start(3, 'F', 3)]);
    assert.deepEqual(
      open.map((e) => `${e.mb}@${e.t}`),
      ['1@2', '2@1', '3@3'],
    );
  });

  it('gives validation the first start and the first end of each task in any order, and every repeat in order', () => {
    const repeats: string[] = [];
    const { starts, ends } = firstTaskEvents(
      [end(1, 'F', 0), start(2, 'F', 0), start(3, 'F', 0), end(4, 'F', 0), start(5, 'B', 0)],
      (e) => repeats.push(`${e.type} ${e.t}`),
    );
    assert.equal(starts.get(taskKey(0, 0, task('F', 0)))?.t, 2);
    assert.equal(ends.get(taskKey(0, 0, task('F', 0)))?.t, 1);
    assert.equal(starts.get(taskKey(0, 0, task('B', 0)))?.t, 5);
    assert.equal(ends.has(taskKey(0, 0, task('B', 0))), false);
    assert.deepEqual(repeats, ['task-start 3', 'task-end 4']);
  });
});
