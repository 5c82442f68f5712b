import { strict as assert } from 'node:assert';
import { HintPolicy, StageContext } from '../policies/hint';
import { PhaseMemo, bPriority, bf, bfw, compareReady, fPriority, fb, readyViewOf } from '../policies/hints';
import { PipelineShape, ShapeError, formatTask, parseTask } from '../policies/task';

const shape: PipelineShape = { stages: 4, chunks: 2, microbatches: 8, splitBackward: false };
const split: PipelineShape = { ...shape, splitBackward: true };
const ctx = (s: PipelineShape): StageContext => ({ stage: 1, shape: s, done: () => false, inflight: 0 });
const view = (text: string) => readyViewOf(text.split(' ').filter(Boolean).map(parseTask));
const pick = (p: HintPolicy<any>, ready: string, memo: unknown, s = shape) => {
  const t = p.choose(view(ready), deepFreeze(memo), ctx(s));
  return t === null ? null : formatTask(t);
};

/**
 * Plays `rounds` of [ready tasks, the pick expected] through `p` from its start on shape `s`,
 * asserting each pick; returns the picks.
 */
function playRounds(p: HintPolicy<PhaseMemo>, s: PipelineShape, rounds: [string, string][]): string[] {
  let memo = p.start(ctx(s));
  return rounds.map(([ready, expected]) => {
    const t = p.choose(view(ready), memo, ctx(s))!;
    assert.equal(formatTask(t), expected, `ready {${ready}} in phase ${memo.phase}`);
    memo = p.advance(memo, t, ctx(s));
    return formatTask(t);
  });
}

function deepFreeze<T>(v: T): T {
  if (typeof v === 'object' && v !== null) {
    Object.values(v).forEach(deepFreeze);
    Object.freeze(v);
  }
  return v;
}

describe('hint orders', () => {
  describe('readyViewOf', () => {
    it('sorts forwards by (chunk, mb) and backwards and weights by (chunk desc, mb)', () => {
      const v = view('B2 F3@1 W0 B1@1 F5 W1@1 F4 B0 B3@1');
      assert.deepEqual(v.F.map(formatTask), ['F4', 'F5', 'F3@1']);
      assert.deepEqual(v.B.map(formatTask), ['B1@1', 'B3@1', 'B0', 'B2']);
      assert.deepEqual(v.W.map(formatTask), ['W1@1', 'W0']);
      assert.ok(v.has(parseTask('B3@1')));
      assert.ok(!v.has(parseTask('B3')));
    });
    it('ignores duplicates and compares kinds F < B < W', () => {
      assert.deepEqual(view('F1 F1 B0').F.map(formatTask), ['F1']);
      assert.ok(
        compareReady(parseTask('F9'), parseTask('B0')) < 0 && compareReady(parseTask('W0'), parseTask('B9')) > 0,
      );
    });
  });

  describe('choose: ready set and memory -> pick', () => {
    const B: PhaseMemo = { phase: 'B' };
    const F: PhaseMemo = { phase: 'F' };
    const table: [HintPolicy<any>, string, unknown, string | null, PipelineShape?][] = [
      [bf, 'F2 B0', B, 'B0'],
      [bf, 'F2 B0', F, 'F2'],
      [bf, 'F2', B, 'F2'],
      [bf, 'B1', F, 'B1'],
      [bf, '', B, null],
      [bf, 'B0 B2@1 B1@1 F1@1', B, 'B1@1'],
      [bf, 'F3@1 F5 F4 B0', F, 'F4'],
      [bf, 'W0 F1', B, 'F1', split],
      [bf, 'W1 W0@1', F, 'W0@1', split],
      [fb, 'F2 B0', F, 'F2'],
      [fb, 'F2 B0', B, 'B0'],
      [fb, 'B0', F, 'B0'],
      [bPriority, 'F0 B1', null, 'B1'],
      [bPriority, 'F0 F1', null, 'F0'],
      [bPriority, 'W0 F0', null, 'F0', split],
      [fPriority, 'F0 B1', null, 'F0'],
      [fPriority, 'B1 B0@1', null, 'B0@1'],
      [bfw, 'B0 F1 W0', B, 'B0', split],
      [bfw, 'B0 F1 W0', F, 'F1', split],
      [bfw, 'B0 W0', F, 'B0', split],
      [bfw, 'W2 W1@1', B, 'W1@1', split],
      [bfw, '', F, null, split],
    ];
    for (const [p, ready, memo, expected, s] of table)
      it(`${p.name} in ${JSON.stringify(memo)} with {${ready}} picks ${expected ?? 'nothing'}`, () =>
        assert.equal(pick(p, ready, memo, s), expected));
  });

  describe('memory', () => {
    it('bf and bfw start in phase B, fb in phase F', () => {
      assert.deepEqual(bf.start(ctx(shape)), { phase: 'B' });
      assert.deepEqual(bfw.start(ctx(split)), { phase: 'B' });
      assert.deepEqual(fb.start(ctx(shape)), { phase: 'F' });
    });
    it('a B moves to phase F, an F to phase B, a W starts a new round in the first phase, and the old memo is kept', () => {
      const m: PhaseMemo = deepFreeze({ phase: 'B' });
      assert.deepEqual(bf.advance(m, parseTask('B0'), ctx(shape)), { phase: 'F' });
      assert.deepEqual(bf.advance({ phase: 'F' }, parseTask('F3@1'), ctx(shape)), { phase: 'B' });
      assert.deepEqual(bfw.advance(m, parseTask('W0'), ctx(split)), { phase: 'B' });
      assert.deepEqual(bfw.advance(deepFreeze({ phase: 'F' }), parseTask('W0'), ctx(split)), { phase: 'B' });
      assert.deepEqual(fb.advance(deepFreeze({ phase: 'B' }), parseTask('W0'), ctx(split)), { phase: 'F' });
      assert.deepEqual(m, { phase: 'B' });
    });
    it('bfw: after a W (nothing else was ready) the next round considers a ready backward first (RRFP §7.1)', () => {
      playRounds(bfw, split, [
        ['B0 F2', 'B0'],
        ['W0', 'W0'],
        ['B1 F2', 'B1'],
        ['F2 W1', 'F2'],
      ]);
    });
    it('bf alternates backward and forward while both are ready, and never idles when one kind is missing', () => {
      const picks = playRounds(bf, shape, [
        ['F0', 'F0'],
        ['F1 B0', 'B0'],
        ['F1 B1', 'F1'],
        ['F2 B1', 'B1'],
        ['F2', 'F2'],
        ['F3 B2', 'B2'],
        ['F3 B3', 'F3'],
      ]);
      assert.equal(picks.join(' '), 'F0 B0 F1 B1 F2 B2 F3');
    });
  });

  describe('check', () => {
    it('bfw refuses a shape without split backward', () =>
      assert.throws(
        () => bfw.check(shape),
        (e: unknown) => e instanceof ShapeError && /bfw needs splitBackward: true/.test(e.message),
      ));
    it('bf accepts both, and every order refuses an invalid shape', () => {
      bf.check(shape);
      bf.check(split);
      for (const p of [bf, fb, bPriority, fPriority, bfw])
        assert.throws(() => p.check({ ...split, microbatches: 0 }), /microbatches must be a positive integer, got 0/);
    });
    it('only bfw asks for split backward, and none is binding', () => {
      assert.deepEqual(
        [bf, fb, bPriority, fPriority, bfw].map((p) => [p.name, p.splitBackward, p.binding]),
        [
          ['bf', false, false],
          ['fb', false, false],
          ['b-priority', false, false],
          ['f-priority', false, false],
          ['bfw', true, false],
        ],
      );
    });
  });
});
