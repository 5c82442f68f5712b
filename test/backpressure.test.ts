import { strict as assert } from 'node:assert';
import {
  BackpressureLimitError,
  chooseWithBackpressure,
  drainChoice,
  focusTarget,
  inBackpressure,
  inflightBound,
  stageBufferLimit,
} from '../policies/backpressure';
import { Arbiter, arbiterFor } from '../policies/arbiter';
import { HintPolicy, ReadyView, StageContext } from '../policies/hint';
import { bf, bfw, fPriority, readyViewOf } from '../policies/hints';
import { resolvePolicy } from '../policies/registry';
import { PipelineShape, Task, allTasks, formatTask, parseTask, task } from '../policies/task';
import { shape, dependenciesOf } from './helpers-task';

/** A stage context whose done set is `done` (text forms); inflight follows its definition. */
function ctxOf(s: PipelineShape, stage: number, done: Iterable<string>): StageContext {
  const set = new Set(done);
  const release = s.splitBackward ? 'W' : 'B';
  const inflight = [...set].filter((k) => {
    const t = parseTask(k);
    return t.kind === 'F' && !set.has(formatTask(task(release, t.mb, t.chunk)));
  }).length;
  return { stage, shape: s, done: (t) => set.has(formatTask(t)), inflight };
}
const words = (text: string) => text.split(' ').filter(Boolean);
const view = (text: string) => readyViewOf(words(text).map(parseTask));
const fmt = (t: Task | null) => (t === null ? null : formatTask(t));

describe('backpressure', () => {
  describe('one chunk per stage: backward-only drain', () => {
    const s = shape(4, 8);
    const full = ctxOf(s, 0, words('F0 F1 F2'));
    it('counts the stage as in backpressure at the limit and not below it', () => {
      assert.equal(full.inflight, 3);
      assert.ok(inBackpressure(bf, full, 3));
      assert.ok(!inBackpressure(bf, full, 4));
    });
    const table: [string, string | null][] = [
      ['F3 B0', 'B0'],
      ['F3', null],
      ['F3 B1 B0', 'B0'],
    ];
    for (const [ready, expected] of table)
      it(`with {${ready}} at the limit it picks ${expected ?? 'nothing (waits)'}, never a forward`, () =>
        assert.equal(fmt(chooseWithBackpressure(fPriority, null, view(ready), full, 3)), expected));
    it('runs a ready W when no B is ready, when backward is split', () => {
      const sp = shape(4, 8, 1, true);
      const c = ctxOf(sp, 0, words('F0 F1 B0'));
      assert.equal(c.inflight, 2);
      assert.equal(fmt(drainChoice(view('F2 W0'), c)), 'W0');
      assert.equal(fmt(drainChoice(view('F2 W0 B1'), c)), 'B1');
    });
    it('leaves the choice to the wrapped policy below the limit', () =>
      assert.equal(fmt(chooseWithBackpressure(bf, { phase: 'F' }, view('F3 B0'), full, 4)), 'F3'));
  });

  describe('interleaved: focused microbatch-by-microbatch drain', () => {
    const s = shape(2, 4, 2);
    it('targets the lowest unfinished microbatch in the order F@0..F@(V-1), B@(V-1)..B@0', () => {
      const table: [string, string | null][] = [
        ['', 'F0'],
        ['F0 F1', 'F0@1'],
        ['F0 F1 F0@1 F1@1', 'B0@1'],
        ['F0 F0@1 B0@1', 'B0'],
        ['F0 F0@1 B0@1 B0 F1', 'F1@1'],
        ['F0 F1 F2 F3 F0@1 F1@1 F2@1 F3@1 B0@1 B1@1 B2@1 B3@1 B0 B1 B2 B3', null],
      ];
      for (const [done, target] of table)
        assert.equal(fmt(focusTarget(ctxOf(s, 0, words(done)))), target, `done {${done}}`);
    });
    it('runs the target when it is ready, and otherwise waits rather than skip to another ready task', () => {
      const c = ctxOf(s, 0, words('F0 F1 F0@1 F1@1'));
      assert.equal(fmt(chooseWithBackpressure(bf, { phase: 'B' }, view('F2 B1@1'), c, 2)), null);
      assert.equal(fmt(chooseWithBackpressure(bf, { phase: 'F' }, view('F2 B1@1 B0@1'), c, 2)), 'B0@1');
    });
    it("with split backward, finishes a microbatch with its W's, and runs a ready W while the target is not ready", () => {
      const sp = shape(2, 2, 2, true);
      const c = ctxOf(sp, 0, words('F0 F1 F0@1 F1@1 B0@1'));
      assert.equal(fmt(focusTarget(c)), 'B0');
      assert.equal(fmt(drainChoice(view('W0@1 F2'), c)), 'W0@1');
      assert.equal(fmt(drainChoice(view('W0@1 B0'), c)), 'B0');
      const bs = ctxOf(sp, 0, words('F0 F1 F0@1 F1@1 B0@1 B0'));
      assert.equal(fmt(focusTarget(bs)), 'W0@1');
      const end = ctxOf(sp, 0, words('F0 F1 F0@1 F1@1 B0@1 B1@1 B0 B1 W0@1 W0'));
      assert.equal(end.inflight, 2);
      assert.equal(fmt(focusTarget(end)), 'W1@1');
    });
    it("starts its scan at the stage's first unfinished microbatch, so a drain step does not cost O(M)", () => {
      const big = shape(2, 1000, 2);
      let asked = 0;
      const c: StageContext = {
        stage: 0,
        shape: big,
        inflight: 3,
        firstUnfinished: 998,
        done: (t) => (asked++, t.mb < 998 || (t.mb === 998 && t.kind === 'F')),
      };
      assert.equal(fmt(focusTarget(c)), 'B998@1');
      assert.ok(asked <= 4, `asked done() ${asked} times`);
    });
  });

  describe('the arbiter (policies/arbiter.ts)', () => {
    it("picks a binding schedule's own next task at any in-flight count and never reports it in backpressure", () => {
      const p = resolvePolicy('1f1b');
      const c = ctxOf(shape(2, 4), 0, ['F0', 'F1']);
      const a = arbiterFor(p, 1);
      const memo = p.advance(p.advance(p.start(ctxOf(shape(2, 4), 0, [])), task('F', 0, 0), c), task('F', 1, 0), c);
      assert.deepEqual(a.pick(view('F2 B0'), memo, c), { task: p.choose(view('F2 B0'), memo, c), backpressure: false });
      assert.ok(!inBackpressure(p, c, 1));
    });
    it('keeps the name, flags, start and advance of the policy it arbitrates', () => {
      const a = arbiterFor(bfw, 2);
      const c = ctxOf(shape(2, 4, 1, true), 0, ['F0']);
      assert.deepEqual([a.name, a.binding, a.limit], ['bfw', false, 2]);
      assert.deepEqual(a.start(c), bfw.start(c));
      assert.deepEqual(a.advance(bfw.start(c), task('F', 0, 0), c), bfw.advance(bfw.start(c), task('F', 0, 0), c));
    });
    for (const bad of [0, -1, 1.5, NaN])
      it(`refuses the limit ${bad}`, () =>
        assert.throws(
          () => arbiterFor(bf, bad),
          (e: unknown) => e instanceof BackpressureLimitError && e.message.includes('positive integer'),
        ));
  });

  describe('whole pipelines in event order (random arrival order, no durations)', () => {
    function rng(seed: number) {
      return () => {
        seed = (seed + 0x6d2b79f5) | 0;
        let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
        t ^= t + Math.imul(t ^ (t >>> 7), 61 | t);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
      };
    }
    /** Runs all stages with `policy`; returns the peak in-flight count, or throws on deadlock. */
    function run(arbiter: Pick<Arbiter<any>, 'start' | 'pick' | 'advance'>, s: PipelineShape, seed: number): number {
      const policy = {
        start: arbiter.start,
        choose: (r: ReadyView, m: unknown, c: StageContext) => arbiter.pick(r, m, c).task,
        advance: arbiter.advance,
      };
      const next = rng(seed);
      const done = Array.from({ length: s.stages }, () => new Set<string>());
      const isDone = (stage: number, t: Task) => done[stage].has(formatTask(t));
      const ready = (stage: number, t: Task): boolean => {
        if (isDone(stage, t)) return false;
        return dependenciesOf(stage, t, s).every((dep) => isDone(dep.stage, dep.task));
      };
      const tasks = allTasks(s);
      const ctx = (stage: number) => ctxOf(s, stage, done[stage]);
      const memo = done.map((_, stage) => policy.start(ctx(stage)));
      let peak = 0;
      for (let left = tasks.length * s.stages; left > 0;) {
        const order = done.map((_, i) => i).sort(() => next() - 0.5);
        const stage = order.find(
          (st) => policy.choose(readyViewOf(tasks.filter((t) => ready(st, t))), memo[st], ctx(st)) !== null,
        );
        if (stage === undefined)
          throw new Error(
            `deadlock: ${done.map((d, st) => `stage ${st} ran ${d.size}, inflight ${ctx(st).inflight}`).join('; ')}`,
          );
        const c = ctx(stage);
        const t = policy.choose(readyViewOf(tasks.filter((u) => ready(stage, u))), memo[stage], c)!;
        memo[stage] = policy.advance(memo[stage], t, c);
        done[stage].add(formatTask(t));
        peak = Math.max(peak, ctx(stage).inflight);
        left--;
      }
      return peak;
    }

    /** `policy` with no drain at all. */
    const unlimited = (policy: HintPolicy<any>) => ({
      start: (c: StageContext) => policy.start(c),
      pick: (r: ReadyView, m: unknown, c: StageContext) => ({ task: policy.choose(r, m, c), backpressure: false }),
      advance: (m: unknown, t: Task, c: StageContext) => policy.advance(m, t, c),
    });

    it('finish without deadlock, never above the limit with one chunk and at most V above it interleaved', () => {
      let unboundedAbove = 0;
      for (const P of [2, 3, 4])
        for (const V of [1, 2])
          for (const M of [3, 8])
            for (const split of [false, true])
              for (const limit of [1, 2, 5])
                for (const seed of [1, 2, 3]) {
                  const s = shape(P, M, V, split);
                  const base = split ? bfw : bf;
                  const peak = run(arbiterFor(base, limit), s, seed);
                  const where = `P=${P} V=${V} M=${M} split=${split} limit=${limit} seed=${seed}`;
                  assert.ok(peak <= limit + (V === 1 ? 0 : V), `${where}: peak ${peak}`);
                  if (run(unlimited(fPriority), s, seed) > limit + V) unboundedAbove++;
                }
      assert.ok(unboundedAbove > 0, 'f-priority without backpressure should exceed the bound somewhere');
    });
  });

  describe('limits per stage and the in-flight bound', () => {
    it('depth is P - s at stage s; a number is the same everywhere; anything else is refused', () => {
      assert.deepEqual(
        [0, 1, 2, 3].map((st) => stageBufferLimit('depth', st, 4)),
        [4, 3, 2, 1],
      );
      assert.deepEqual(
        [0, 3].map((st) => stageBufferLimit(5, st, 4)),
        [5, 5],
      );
      assert.throws(() => stageBufferLimit(0, 0, 4), BackpressureLimitError);
      assert.throws(() => stageBufferLimit('deep' as never, 0, 4), BackpressureLimitError);
    });

    it('a non-binding policy is held to its limit (limit + V interleaved) and to the forwards there are', () => {
      assert.equal(inflightBound(bf, shape(4, 16), 0, 3), 3);
      assert.equal(inflightBound(bf, shape(4, 2), 0, 3), 2);
      assert.equal(inflightBound(bf, shape(4, 16, 2), 0, 3), 5);
    });

    it('a binding schedule ignores the limit: its own order decides (1F1B: P - s, GPipe: M)', () => {
      const s = shape(4, 16);
      assert.deepEqual(
        [0, 1, 2, 3].map((st) => inflightBound(resolvePolicy('1f1b'), s, st, 1)),
        [4, 3, 2, 1],
      );
      assert.deepEqual(
        [0, 3].map((st) => inflightBound(resolvePolicy('gpipe'), s, st, 1)),
        [16, 16],
      );
      assert.equal(inflightBound(resolvePolicy('1f1b'), shape(4, 2), 0, 1), 2);
    });

    it('a binding policy that picks a task its own order cannot have ready is refused, naming it', () => {
      const bad: HintPolicy<null> = {
        ...resolvePolicy('bf'),
        name: 'bad',
        binding: true,
        start: () => null,
        advance: () => null,
        choose: () => task('B', 0, 0),
      } as HintPolicy<null>;
      assert.throws(
        () => inflightBound(bad, shape(2, 4), 0, 1),
        /bad at stage 0 picked B0, which has run or whose predecessor at the stage has not/,
      );
    });

    it('a binding policy that returns something that is not a task of the pipeline is refused, naming it', () => {
      for (const [pick, problem] of [
        [undefined, 'not a task object'],
        [task('F', 4, 0), 'mb must be an integer from 0 to 3'],
        [task('W', 0, 0), 'kind must be F, B'],
      ] as const) {
        const bad = {
          ...resolvePolicy('bf'),
          name: 'bad',
          binding: true,
          start: () => null,
          advance: () => null,
          choose: () => pick,
        } as unknown as HintPolicy<null>;
        assert.throws(
          () => inflightBound(bad, shape(2, 4), 0, 1),
          (e: Error) =>
            e.name === 'InflightBoundError' &&
            e.message === `bad at stage 0 returned something that is not a task of this pipeline (${problem})`,
        );
      }
    });
  });
});
