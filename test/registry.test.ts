import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { arbiterFor } from '../policies/arbiter';
import { ReadySet } from '../stage/ready-set';
import { stageStep } from '../stage/stage-logic';
import { initialStageState } from '../stage/stage-state';
import { runTasks } from './helpers-stage';
import { FixedMemo, ScheduleViolationError, remaining } from '../policies/fixed';
import { HintPolicy, StageContext } from '../policies/hint';
import { readyViewOf } from '../policies/hints';
import { PolicyModuleError, UnknownPolicyError, policyNames, resolvePolicy } from '../policies/registry';
import { PipelineShape, ShapeError, Task, formatTask, parseTask } from '../policies/task';

const shape = (stages: number, microbatches: number, chunks = 1, splitBackward = false): PipelineShape => ({
  stages,
  chunks,
  microbatches,
  splitBackward,
});
const ctx = (s: PipelineShape, stage = 0): StageContext => ({ stage, shape: s, done: () => false, inflight: 0 });
const view = (text: string) => readyViewOf(text.split(' ').filter(Boolean).map(parseTask));
const fmt = (t: Task | null) => (t === null ? null : formatTask(t));

function deepFreeze<T>(v: T): T {
  if (typeof v === 'object' && v !== null) {
    Object.values(v).forEach(deepFreeze);
    Object.freeze(v);
  }
  return v;
}

const ALL = [
  'bf',
  'fb',
  'b-priority',
  'f-priority',
  'bfw',
  'gpipe',
  '1f1b',
  'interleaved-1f1b',
  'zb-h1',
  'hint:gpipe',
  'hint:1f1b',
  'hint:interleaved-1f1b',
  'hint:zb-h1',
];

describe('policy registry', () => {
  it('knows every built-in name, and each resolves to a policy of that name', () => {
    assert.deepEqual([...policyNames()].sort(), [...ALL].sort());
    for (const name of ALL) assert.equal(resolvePolicy(name).name, name);
  });

  it('marks the plain schedule names binding and everything else non-binding', () => {
    const binding = ALL.filter((n) => resolvePolicy(n).binding);
    assert.deepEqual(binding.sort(), ['1f1b', 'gpipe', 'interleaved-1f1b', 'zb-h1']);
  });

  it('asks for split backward exactly for bfw and zb-h1 in both modes', () =>
    assert.deepEqual(ALL.filter((n) => resolvePolicy(n).splitBackward).sort(), ['bfw', 'hint:zb-h1', 'zb-h1']));

  it('refuses an unknown name and lists the known ones', () =>
    assert.throws(
      () => resolvePolicy('bff'),
      (e: unknown) =>
        e instanceof UnknownPolicyError &&
        e.message.startsWith('unknown policy "bff"; known: bf, fb,') &&
        e.message.includes('hint:zb-h1'),
    ));

  it('passes shape checks through: interleaved-1f1b refuses M not a multiple of P in both modes', () => {
    for (const n of ['interleaved-1f1b', 'hint:interleaved-1f1b'])
      assert.throws(() => resolvePolicy(n).check(shape(4, 6, 2)), ShapeError);
    resolvePolicy('hint:interleaved-1f1b').check(shape(4, 8, 2));
  });

  describe('user policy modules', () => {
    let dir: string;
    before(() => {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-policy-'));
    });
    after(() => fs.rmSync(dir, { recursive: true, force: true }));
    const write = (file: string, body: string) => {
      const p = path.join(dir, file);
      fs.writeFileSync(p, body);
      return p;
    };
    const policyBody = (exportAs: string) => `
      const p = { name: 'last-forward', binding: false, splitBackward: false,
        check() {}, start() { return null; },
        choose(ready) { return ready.F[ready.F.length - 1] ?? ready.B[0] ?? null; },
        advance() { return null; } };
      ${exportAs}`;

    it('loads a module that exports `policy`, and one that exports `default`', () => {
      for (const [file, exp] of [
        ['named.js', 'exports.policy = p;'],
        ['dflt.js', 'exports.default = p;'],
      ]) {
        const p = resolvePolicy(write(file, policyBody(exp)));
        assert.equal(p.name, 'last-forward');
        assert.equal(fmt(p.choose(view('F0 F1 B0'), null, ctx(shape(2, 4)))), 'F1');
      }
    });

    it('refuses a module without either export, naming the path', () => {
      const file = write('none.js', policyBody('exports.other = p;'));
      assert.throws(
        () => resolvePolicy(file),
        (e: unknown) =>
          e instanceof PolicyModuleError &&
          e.message.includes(JSON.stringify(file)) &&
          e.message.includes(`neither 'default' nor 'policy'`),
      );
    });

    it('refuses an export that is not a HintPolicy, saying which members are wrong', () => {
      const file = write(
        'bad.js',
        `exports.policy = { name: 'x', binding: 'no', splitBackward: false, check() {}, start() {}, advance() {} };`,
      );
      assert.throws(
        () => resolvePolicy(file),
        (e: unknown) =>
          e instanceof PolicyModuleError &&
          /binding must be a boolean, got string; choose must be a function, got undefined/.test(e.message),
      );
    });

    it('refuses a module that cannot be loaded, keeping the cause', () => {
      const missing = path.join(dir, 'missing.js');
      assert.throws(
        () => resolvePolicy(missing),
        (e: unknown) => e instanceof PolicyModuleError && e.message.includes('cannot load') && e.cause instanceof Error,
      );
      const broken = write('broken.js', 'throw new Error("boom at load");');
      assert.throws(() => resolvePolicy(broken), /boom at load/);
    });

    it('refuses a module whose export throws when it is read, naming the module', () => {
      const file = write(
        'getter.js',
        `Object.defineProperty(exports, 'policy', { get() { throw new Error('boom in getter'); } });`,
      );
      assert.throws(
        () => resolvePolicy(file),
        (e: unknown) =>
          e instanceof PolicyModuleError &&
          e.message === `policy module ${JSON.stringify(file)}: reading its export threw Error: boom in getter`,
      );
    });

    it('names the module and the member when one of its functions throws; a ShapeError from check passes as it is', () => {
      const members = `name: 'thrower', binding: false, splitBackward: false,
        start() { throw 'no memo'; }, choose(ready) { return ready.F[0].mb; }, advance() { throw new RangeError('far'); }`;
      const file = write('thrower.js', `exports.policy = { ${members}, check(shape) { return shape.nothing.here; } };`);
      const p = resolvePolicy(file);
      const named = (member: string, what: string) => (e: unknown) =>
        e instanceof PolicyModuleError &&
        e.message === `policy module ${JSON.stringify(file)}: ${member} threw ${what}` &&
        e.cause !== undefined;
      assert.throws(
        () => p.check(shape(2, 4)),
        named('check', "TypeError: Cannot read properties of undefined (reading 'here')"),
      );
      assert.throws(() => p.start(ctx(shape(2, 4))), named('start', 'string no memo'));
      assert.throws(
        () => p.choose(view(''), null, ctx(shape(2, 4))),
        named('choose', "TypeError: Cannot read properties of undefined (reading 'mb')"),
      );
      assert.throws(() => p.advance(null, parseTask('F0'), ctx(shape(2, 4))), named('advance', 'RangeError: far'));
      const refusing = write(
        'refusing.js',
        `const { ShapeError } = require(${JSON.stringify(path.resolve(__dirname, '../policies/task'))});
        exports.policy = { ${members}, check() { throw new ShapeError('thrower needs M >= 8'); } };`,
      );
      assert.throws(
        () => resolvePolicy(refusing).check(shape(2, 4)),
        (e: unknown) => e instanceof ShapeError && e.message === 'thrower needs M >= 8',
      );
    });

    it('gives choose the ready buffers read-only: a module that sorts a list in place fails, naming itself, and the buffers keep their order', () => {
      const file = write(
        'sorting.js',
        `exports.policy = { name: 'sorting', binding: false, splitBackward: false,
        check() {}, start() { return null; }, advance() { return null; },
        choose(ready) { return ready.F.sort((a, b) => b.mb - a.mb)[0] ?? null; } };`,
      );
      const ready = new ReadySet(shape(2, 4));
      for (const t of ['F0', 'F1', 'F2']) ready.add(parseTask(t));
      assert.throws(
        () => resolvePolicy(file).choose(ready, null, ctx(shape(2, 4))),
        (e: unknown) =>
          e instanceof PolicyModuleError && /choose threw TypeError: the ready view is read-only/.test(e.message),
      );
      assert.deepEqual(ready.F.map(formatTask), ['F0', 'F1', 'F2']);
    });

    it('cannot change a ready task in place: the stage runs every task as it was made ready', () => {
      // Sloppy-mode code: an assignment to a frozen property does nothing (no error).
      const file = write(
        'renaming.js',
        `exports.policy = { name: 'renaming', binding: false, splitBackward: false,
        check() {}, start() { return null; }, advance() { return null; },
        choose(ready) { if (ready.F[1]) ready.F[1].mb = 2; return ready.B[0] ?? ready.F[0] ?? null; } };`,
      );
      const policy = resolvePolicy(file);
      const one = { ...shape(1, 3), splitBackward: false };
      const s = initialStageState({ stage: 0, shape: one, arbiter: arbiterFor(policy, 32) });
      for (let mb = 0; mb < 3; mb++) stageStep(s, { type: 'input', iteration: 0, mb, chunk: 0 }, 0);
      const { ran } = runTasks(s, stageStep(s, { type: 'start', iteration: 0 }, 0), 0, 1);
      assert.deepEqual(ran, ['F0', 'B0', 'F1', 'B1', 'F2', 'B2']);
    });

    it("calls the module's functions with its object as this", () => {
      const file = write(
        'self.js',
        `exports.policy = { name: 'self', binding: false, splitBackward: false, first: 'B',
        check() {}, start() { return null; }, advance() { return null; },
        choose(ready) { return ready[this.first][0] ?? ready.F[0] ?? null; } };`,
      );
      assert.equal(fmt(resolvePolicy(file).choose(view('F0 B1'), null, ctx(shape(2, 4)))), 'B1');
    });
  });

  describe('fixed schedules in binding and hint mode', () => {
    const s = shape(2, 4);
    // 1f1b, stage 0: F0 F1 B0 F2 B1 F3 B2 B3
    it('binding waits for exactly the next scheduled task, even when others are ready', () => {
      const p = resolvePolicy('1f1b') as HintPolicy<FixedMemo>;
      let memo = p.start(ctx(s));
      for (const t of ['F0', 'F1']) memo = p.advance(memo, parseTask(t), ctx(s));
      assert.equal(fmt(p.choose(view('F2 F3'), deepFreeze(memo), ctx(s))), null);
      assert.equal(fmt(p.choose(view('F2 B0'), memo, ctx(s))), 'B0');
      assert.throws(
        () => p.advance(memo, parseTask('F2'), ctx(s)),
        (e: unknown) =>
          e instanceof ScheduleViolationError &&
          e.message === 'stage 0, 1f1b: ran F2, but the next scheduled task is B0',
      );
    });

    it('hint mode runs the first ready task of the list, and remembers tasks run out of order', () => {
      const p = resolvePolicy('hint:1f1b') as HintPolicy<FixedMemo>;
      let memo = p.start(ctx(s));
      const steps: [string, string | null][] = [
        ['F0', 'F0'],
        ['F1', 'F1'],
        ['F2 F3', 'F2'],
        ['F3 B0', 'B0'],
        ['F3 B1', 'B1'],
        ['F3', 'F3'],
        ['B3', 'B3'],
        ['B2', 'B2'],
        ['', null],
      ];
      for (const [ready, expected] of steps) {
        const t = p.choose(view(ready), deepFreeze(memo), ctx(s));
        assert.equal(fmt(t), expected, `ready {${ready}}, remaining ${remaining(memo).map(formatTask).join(' ')}`);
        if (t) memo = p.advance(memo, t, ctx(s));
      }
      assert.equal(memo.cursor, memo.order.length);
      assert.deepEqual(memo.ranAhead, []);
    });

    it('hint mode refuses to run a task twice', () => {
      const p = resolvePolicy('hint:gpipe') as HintPolicy<FixedMemo>;
      const memo = p.advance(p.advance(p.start(ctx(s)), parseTask('F1'), ctx(s)), parseTask('F0'), ctx(s));
      assert.equal(memo.cursor, 2);
      assert.throws(
        () => p.advance(memo, parseTask('F1'), ctx(s)),
        /stage 0, hint:gpipe: ran F1, but it already ran this iteration/,
      );
      assert.throws(() => p.advance(memo, parseTask('W0'), ctx(s)), /ran W0, but it is not in this stage's schedule/);
    });

    it("start builds the list of the context's stage, as plain data", () => {
      const p = resolvePolicy('zb-h1') as HintPolicy<FixedMemo>;
      const memo = p.start(ctx(shape(2, 4, 1, true), 1));
      assert.equal(memo.order.map(formatTask).join(' '), 'F0 B0 F1 B1 W0 F2 B2 W1 F3 B3 W2 W3');
      assert.deepEqual(JSON.parse(JSON.stringify(memo)), {
        ...memo,
        order: memo.order.map((t) => ({ ...t })),
        position: [...memo.position],
      });
    });
  });
});
