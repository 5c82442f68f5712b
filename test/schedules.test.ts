import { strict as assert } from 'node:assert';
import {
  SCHEDULES,
  ScheduleBuilder,
  gpipe,
  interleaved1F1B,
  oneFOneB,
  scheduleText,
  zbH1,
} from '../policies/schedules/index';
import {
  PipelineShape,
  ShapeError,
  Task,
  allTasks,
  backwardPredecessor,
  formatTask,
  forwardPredecessor,
  task,
} from '../policies/task';
import { shape } from './helpers-task';

/** Problems with one stage's list: missing/duplicate tasks and local dependency order. */
function localProblems(list: readonly Task[], s: PipelineShape): string[] {
  const problems: string[] = [];
  const at = new Map<string, number>();
  list.forEach((t, i) => {
    const k = formatTask(t);
    if (at.has(k)) problems.push(`${k} appears twice`);
    at.set(k, i);
  });
  const expected = allTasks(s).map(formatTask);
  for (const k of expected) if (!at.has(k)) problems.push(`${k} missing`);
  if (list.length !== expected.length) problems.push(`${list.length} tasks, expected ${expected.length}`);
  const before = (a: Task, b: Task) => {
    const ia = at.get(formatTask(a)),
      ib = at.get(formatTask(b));
    if (ia !== undefined && ib !== undefined && ia > ib) problems.push(`${formatTask(a)} after ${formatTask(b)}`);
  };
  for (let c = 0; c < s.chunks; c++)
    for (let j = 0; j < s.microbatches; j++) {
      before(task('F', j, c), task('B', j, c));
      if (s.splitBackward) before(task('B', j, c), task('W', j, c));
      if (c + 1 < s.chunks) {
        before(task('F', j, c), task('F', j, c + 1));
        before(task('B', j, c + 1), task('B', j, c));
      }
    }
  return problems;
}

/**
 * Runs every stage's list as a binding schedule in event order (no durations): a
 * stage runs its next task once the task's inputs exist. Returns the stuck stages'
 * next tasks, empty when every list ran to the end.
 */
function bindingDeadlock(lists: readonly (readonly Task[])[], s: PipelineShape): string[] {
  const done = new Set<string>();
  const key = (stage: number, t: Task) => `${stage}:${formatTask(t)}`;
  const inputsReady = (stage: number, t: Task): boolean => {
    if (t.kind === 'F') {
      const p = forwardPredecessor(stage, t.chunk, s);
      return p === null || done.has(key(p.stage, task('F', t.mb, p.chunk)));
    }
    if (t.kind === 'W') return done.has(key(stage, task('B', t.mb, t.chunk)));
    const g = backwardPredecessor(stage, t.chunk, s);
    return (
      done.has(key(stage, task('F', t.mb, t.chunk))) && (g === null || done.has(key(g.stage, task('B', t.mb, g.chunk))))
    );
  };
  const cursor = lists.map(() => 0);
  for (let progress = true; progress;) {
    progress = false;
    lists.forEach((list, stage) => {
      while (cursor[stage] < list.length && inputsReady(stage, list[cursor[stage]])) {
        done.add(key(stage, list[cursor[stage]++]));
        progress = true;
      }
    });
  }
  return lists.flatMap((list, stage) =>
    cursor[stage] < list.length ? [`stage ${stage} waits at ${formatTask(list[cursor[stage]])}`] : [],
  );
}

/** Largest number of forwards run whose memory is not released (B, or W when split). */
function peakInflight(list: readonly Task[], s: PipelineShape): number {
  const release = s.splitBackward ? 'W' : 'B';
  let now = 0,
    peak = 0;
  for (const t of list) {
    if (t.kind === 'F') peak = Math.max(peak, ++now);
    else if (t.kind === release) now--;
  }
  return peak;
}

const build = (b: ScheduleBuilder, s: PipelineShape, stage: number) => scheduleText(b.build(s, stage));

describe('fixed schedules', () => {
  describe('pinned text forms', () => {
    const table: [ScheduleBuilder, PipelineShape, number, string][] = [
      [oneFOneB, shape(2, 4), 0, 'F0 F1 B0 F2 B1 F3 B2 B3'],
      [oneFOneB, shape(2, 4), 1, 'F0 B0 F1 B1 F2 B2 F3 B3'],
      [oneFOneB, shape(4, 2), 0, 'F0 F1 B0 B1'],
      [oneFOneB, shape(4, 6), 1, 'F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5'],
      [oneFOneB, shape(2, 2, 1, true), 0, 'F0 F1 B0 W0 B1 W1'],
      [gpipe, shape(2, 3), 0, 'F0 F1 F2 B0 B1 B2'],
      [gpipe, shape(2, 2, 2), 1, 'F0 F1 F0@1 F1@1 B0@1 B1@1 B0 B1'],
      [interleaved1F1B, shape(2, 4, 2), 0, 'F0 F1 F0@1 F1@1 F2 B0@1 F3 B1@1 F2@1 B0 F3@1 B1 B2@1 B3@1 B2 B3'],
      [interleaved1F1B, shape(2, 4, 2), 1, 'F0 F1 F0@1 B0@1 F1@1 B1@1 F2 B0 F3 B1 F2@1 B2@1 F3@1 B3@1 B2 B3'],
      [zbH1, shape(2, 4, 1, true), 0, 'F0 F1 B0 W0 F2 B1 W1 F3 B2 W2 B3 W3'],
      [zbH1, shape(2, 4, 1, true), 1, 'F0 B0 F1 B1 W0 F2 B2 W1 F3 B3 W2 W3'],
      [zbH1, shape(3, 3, 1, true), 1, 'F0 F1 B0 F2 B1 W0 B2 W1 W2'],
    ];
    for (const [b, s, stage, text] of table)
      it(`${b.name} P=${s.stages} V=${s.chunks} M=${s.microbatches}${s.splitBackward ? ' split' : ''} stage ${stage} is "${text}"`, () =>
        assert.equal(build(b, s, stage), text));
  });

  describe('refusals name the numbers', () => {
    const table: [ScheduleBuilder, PipelineShape, RegExp][] = [
      [oneFOneB, shape(2, 4, 2), /1f1b needs chunks = 1, got chunks = 2; use interleaved-1f1b/],
      [interleaved1F1B, shape(4, 6, 2), /microbatches = 6, stages = 4/],
      [interleaved1F1B, shape(2, 4, 1), /interleaved-1f1b needs chunks >= 2, got chunks = 1; use 1f1b/],
      [zbH1, shape(2, 4, 1, false), /zb-h1 needs splitBackward: true/],
      [zbH1, shape(2, 4, 2, true), /zb-h1 needs chunks = 1, got chunks = 2/],
      [gpipe, shape(0, 4), /stages must be a positive integer, got 0/],
    ];
    for (const [b, s, re] of table)
      it(`${b.name} refuses P=${s.stages} V=${s.chunks} M=${s.microbatches}${s.splitBackward ? ' split' : ''}`, () => {
        assert.throws(
          () => b.check(s),
          (e: unknown) => e instanceof ShapeError && re.test(e.message),
        );
        assert.throws(() => b.build(s, 0), ShapeError);
      });
    it('a stage outside the pipeline is refused with its index', () =>
      assert.throws(() => oneFOneB.build(shape(2, 4), 2), /stage must be an integer in \[0, 1\], got 2/));
  });

  describe('every accepted shape of the grid P x V x M x split', () => {
    for (const b of SCHEDULES) {
      it(`${b.name}: complete lists, local dependency order, and no deadlock when binding`, () => {
        let accepted = 0;
        for (const P of [1, 2, 3, 4, 8])
          for (const V of [1, 2, 3, 4])
            for (const M of [1, 3, 4, 8, 13])
              for (const split of [false, true]) {
                const s = shape(P, M, V, split);
                try {
                  b.check(s);
                } catch (e) {
                  assert.ok(e instanceof ShapeError, String(e));
                  continue;
                }
                accepted++;
                const lists = Array.from({ length: P }, (_, stage) => b.build(s, stage));
                lists.forEach((l, stage) =>
                  assert.deepEqual(localProblems(l, s), [], `P=${P} V=${V} M=${M} split=${split} stage ${stage}`),
                );
                assert.deepEqual(bindingDeadlock(lists, s), [], `P=${P} V=${V} M=${M} split=${split}`);
              }
        // gpipe takes all 200; 1f1b the 50 with V=1; zb-h1 the 25 split V=1; interleaved 22 for each V ≥ 2 (P | M).
        const expected = { gpipe: 200, '1f1b': 50, 'zb-h1': 25, 'interleaved-1f1b': 66 }[b.name];
        assert.equal(accepted, expected);
      });
    }
  });

  it('the dependency walk reports a list that waits for a gradient that never comes', () => {
    const s = shape(2, 2);
    const lists = [oneFOneB.build(s, 0), [task('F', 0), task('F', 1), task('B', 1), task('B', 0)]];
    assert.deepEqual(localProblems(lists[1], s), []);
    lists[0] = [task('F', 0), task('B', 0), task('F', 1), task('B', 1)];
    assert.deepEqual(bindingDeadlock(lists, s), ['stage 0 waits at B0', 'stage 1 waits at F1']);
  });

  it('1f1b holds at most min(P-s, M) microbatches in flight at stage s', () => {
    for (const P of [1, 2, 3, 4, 8])
      for (const M of [1, 3, 4, 8, 13])
        for (let s = 0; s < P; s++)
          assert.equal(
            peakInflight(oneFOneB.build(shape(P, M), s), shape(P, M)),
            Math.min(P - s, M),
            `P=${P} M=${M} s=${s}`,
          );
  });

  it('zb-h1 holds at most min(P, M) microbatches until their W: the 1f1b peak of stage 0', () => {
    for (const P of [1, 2, 3, 4, 8])
      for (const M of [1, 3, 4, 8, 13])
        for (let s = 0; s < P; s++) {
          const sp = shape(P, M, 1, true);
          assert.equal(peakInflight(zbH1.build(sp, s), sp), Math.min(P, M), `P=${P} M=${M} s=${s}`);
          assert.equal(Math.min(P, M), peakInflight(oneFOneB.build(shape(P, M), 0), shape(P, M)));
        }
  });

  it('zb-h1 postpones exactly s weight tasks of stage s to after its last B', () => {
    const s = shape(4, 8, 1, true);
    for (let stage = 0; stage < 4; stage++) {
      const list = zbH1.build(s, stage);
      const lastB = list.map((t) => t.kind).lastIndexOf('B');
      const trailingW = list.slice(lastB + 1);
      assert.ok(trailingW.every((t) => t.kind === 'W'));
      assert.equal(trailingW.length, stage + 1, `stage ${stage}`); // s postponed plus the last B's own W
    }
  });
});
