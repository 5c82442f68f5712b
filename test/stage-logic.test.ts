import { strict as assert } from 'assert';
import { arbiterFor } from '../policies/arbiter';
import { stageStep } from '../stage/stage-logic';
import { StageEffect, StageMsg, initialStageState, stageStatus } from '../stage/stage-state';
import { runTasks } from './helpers-stage';
import { HintPolicy } from '../policies/hint';
import { bf } from '../policies/hints';
import { resolvePolicy } from '../policies/registry';
import { PipelineShape, Task, formatTask, task } from '../policies/task';

function stageOf(stage: number, shape: PipelineShape, policyName = 'bf', limit = 32) {
  const policy = resolvePolicy(policyName);
  return initialStageState({
    stage,
    shape: { ...shape, splitBackward: policy.splitBackward },
    arbiter: arbiterFor(policy, limit),
  });
}

const actions = (fx: StageEffect[]) =>
  fx
    .filter((f) => f.type !== 'event')
    .map((f) =>
      f.type === 'run'
        ? `run ${formatTask(f.task)}`
        : f.type === 'send'
          ? `send ${f.kind} ${formatTask(f.task)}->${f.dst}`
          : f.type === 'arbitrate-later'
            ? 'arbitrate later'
            : `finished ${f.iteration}`,
    );

describe('stage logic (pure transitions)', () => {
  const shape: PipelineShape = { stages: 3, chunks: 1, microbatches: 2, splitBackward: false };

  it('runs a forward as soon as its input arrives and sends the activation on', () => {
    const s = stageOf(1, shape);
    assert.deepEqual(actions(stageStep(s, { type: 'start', iteration: 0 }, 0)), []);
    assert.deepEqual(actions(stageStep(s, { type: 'input', iteration: 0, mb: 1, chunk: 0 }, 1)), ['run F1']);
    assert.deepEqual(actions(stageStep(s, { type: 'input', iteration: 0, mb: 0, chunk: 0 }, 2)), []);
    assert.deepEqual(actions(stageStep(s, { type: 'done', iteration: 0, task: task('F', 1) }, 5)), [
      'send activation F1->2',
      'run F0',
    ]);
  });

  it('makes B ready only when its forward ran here and its gradient arrived', () => {
    const s = stageOf(1, shape);
    stageStep(s, { type: 'start', iteration: 0 }, 0);
    assert.deepEqual(actions(stageStep(s, { type: 'grad', iteration: 0, mb: 0, chunk: 0 }, 0)), []);
    assert.deepEqual(actions(stageStep(s, { type: 'input', iteration: 0, mb: 0, chunk: 0 }, 1)), ['run F0']);
    assert.deepEqual(actions(stageStep(s, { type: 'done', iteration: 0, task: task('F', 0) }, 2)), [
      'send activation F0->2',
      'run B0',
    ]);
    assert.deepEqual(actions(stageStep(s, { type: 'done', iteration: 0, task: task('B', 0) }, 3)), [
      'send gradient B0->0',
    ]);
  });

  it('starts B at the loss stage right after its forward, and reports the end of the iteration', () => {
    const s = stageOf(2, shape);
    stageStep(s, { type: 'start', iteration: 0 }, 0);
    stageStep(s, { type: 'input', iteration: 0, mb: 0, chunk: 0 }, 0);
    assert.deepEqual(actions(stageStep(s, { type: 'done', iteration: 0, task: task('F', 0) }, 1)), ['run B0']);
    stageStep(s, { type: 'input', iteration: 0, mb: 1, chunk: 0 }, 1);
    assert.deepEqual(actions(stageStep(s, { type: 'done', iteration: 0, task: task('B', 0) }, 2)), [
      'send gradient B0->1',
      'run F1',
    ]);
    assert.deepEqual(actions(stageStep(s, { type: 'done', iteration: 0, task: task('F', 1) }, 3)), ['run B1']);
    assert.deepEqual(actions(stageStep(s, { type: 'done', iteration: 0, task: task('B', 1) }, 4)), [
      'send gradient B1->1',
      'finished 0',
    ]);
  });

  it('keeps arrivals for an iteration it has not started and replays them at the start', () => {
    const s = stageOf(1, shape);
    assert.deepEqual(actions(stageStep(s, { type: 'input', iteration: 0, mb: 0, chunk: 0 }, 0)), []);
    assert.deepEqual(actions(stageStep(s, { type: 'start', iteration: 0 }, 1)), ['run F0']);
  });

  it('refuses an out-of-shape or far-ahead arrival before its iteration starts, and keeps the valid ones', () => {
    const s = stageOf(1, shape);
    const protocol = (e: Error) => e.name === 'StageProtocolError';
    assert.throws(() => stageStep(s, { type: 'input', iteration: 0, mb: 99, chunk: 0 }, 0), protocol);
    stageStep(s, { type: 'input', iteration: 0, mb: 0, chunk: 0 }, 0);
    assert.throws(
      () => stageStep(s, { type: 'input', iteration: 0, mb: 0, chunk: 0 }, 0),
      (e: Error) => protocol(e) && /duplicate input/.test(e.message),
    );
    const fx = stageStep(s, { type: 'start', iteration: 0 }, 1);
    assert.deepEqual(actions(fx), ['run F0']);
    assert.equal(fx.filter((f) => f.type === 'event' && f.event.type === 'reject').length, 0);
    assert.throws(
      () => stageStep(s, { type: 'grad', iteration: 2, mb: 0, chunk: 0 }, 2),
      (e: Error) => protocol(e) && /more than one ahead/.test(e.message),
    );
    // Arrivals for the next iteration wait, each once.
    for (let mb = 0; mb < shape.microbatches; mb++)
      for (const type of ['input', 'grad'] as const) stageStep(s, { type, iteration: 1, mb, chunk: 0 }, 3);
    assert.throws(
      () => stageStep(s, { type: 'grad', iteration: 1, mb: 0, chunk: 0 }, 3),
      (e: Error) => protocol(e) && /duplicate grad/.test(e.message),
    );
  });

  it('rejects duplicates, out-of-range microbatches and completions of tasks it is not running', () => {
    const s = stageOf(1, shape);
    stageStep(s, { type: 'start', iteration: 0 }, 0);
    stageStep(s, { type: 'input', iteration: 0, mb: 0, chunk: 0 }, 0);
    const bad: StageMsg[] = [
      { type: 'input', iteration: 0, mb: 0, chunk: 0 },
      { type: 'input', iteration: 0, mb: 7, chunk: 0 },
      { type: 'grad', iteration: 0, mb: 0, chunk: 3 },
      { type: 'done', iteration: 0, task: task('B', 1) },
    ];
    for (const m of bad)
      assert.throws(
        () => stageStep(s, m, 1),
        (e: Error) => e.name === 'StageProtocolError' && /stage 1/.test(e.message),
      );
    assert.equal(stageStatus(s).running, 'F0');
  });

  it("starts iterations in order from the job's first, each once: a replayed or forged start is refused and the stage stays usable", () => {
    const policy = resolvePolicy('bf');
    const s = initialStageState({ stage: 2, shape, arbiter: arbiterFor(policy, 32), firstIteration: 5 });
    const refused = (it: number, re: RegExp) =>
      assert.throws(
        () => stageStep(s, { type: 'start', iteration: it }, 0),
        (e: Error) => e.name === 'StageProtocolError' && re.test(e.message),
      );
    refused(7, /start of iteration 7, expected iteration 5/);
    refused(0, /expected iteration 5/);
    stageStep(s, { type: 'start', iteration: 5 }, 0);
    const { ran, fx } = runTasks(
      s,
      [
        ...stageStep(s, { type: 'input', iteration: 5, mb: 0, chunk: 0 }, 1),
        ...stageStep(s, { type: 'input', iteration: 5, mb: 1, chunk: 0 }, 1),
      ],
      5,
      2,
    );
    assert.deepEqual(ran, ['F0', 'B0', 'F1', 'B1']);
    assert.ok(fx.some((f) => f.type === 'finished' && f.iteration === 5));
    refused(5, /start of iteration 5, expected iteration 6/);
    refused(9, /expected iteration 6/);
    stageStep(s, { type: 'start', iteration: 6 }, 5);
    assert.equal(stageStatus(s).iteration, 6);
  });

  it('refuses, before its first start, arrivals for another iteration and duplicates, so none is recorded or taken', () => {
    const policy = resolvePolicy('bf');
    const s = initialStageState({ stage: 1, shape, arbiter: arbiterFor(policy, 32), firstIteration: 3 });
    const early = (iteration: number, mb: number) => () => stageStep(s, { type: 'input', iteration, mb, chunk: 0 }, 0);
    assert.throws(early(7, 0), /input for iteration 7 before the first, 3, has started/);
    assert.throws(early(2, 0), /before the first, 3, has started/);
    early(3, 0)();
    assert.throws(early(3, 0), /duplicate input for F0 of iteration 3 before its start/);
    stageStep(s, { type: 'start', iteration: 3 }, 1);
    assert.deepEqual(stageStatus(s).running, 'F0');
    // One iteration on: an early duplicate for the next is refused as it comes, too.
    stageStep(s, { type: 'input', iteration: 4, mb: 1, chunk: 0 }, 2);
    assert.throws(
      () => stageStep(s, { type: 'input', iteration: 4, mb: 1, chunk: 0 }, 2),
      /duplicate input for F1 of iteration 4/,
    );
  });

  it('drains backward-only at the buffer limit', () => {
    const s = stageOf(0, { stages: 2, chunks: 1, microbatches: 4, splitBackward: false }, 'f-priority', 2);
    stageStep(s, { type: 'start', iteration: 0 }, 0);
    for (let j = 0; j < 4; j++) stageStep(s, { type: 'input', iteration: 0, mb: j, chunk: 0 }, 0);
    assert.deepEqual(actions(stageStep(s, { type: 'done', iteration: 0, task: task('F', 0) }, 1)), [
      'send activation F0->1',
      'run F1',
    ]);
    assert.deepEqual(actions(stageStep(s, { type: 'done', iteration: 0, task: task('F', 1) }, 2)), [
      'send activation F1->1',
    ]);
    assert.equal(stageStatus(s).inflight, 2);
    assert.deepEqual(actions(stageStep(s, { type: 'grad', iteration: 0, mb: 1, chunk: 0 }, 3)), ['run B1']);
    assert.deepEqual(actions(stageStep(s, { type: 'done', iteration: 0, task: task('B', 1) }, 4)), ['run F2']);
  });
  it('with settleBeforeArbitration, asks once to arbitrate after a change and picks only when told, seeing every arrival of the instant', () => {
    const policy = resolvePolicy('bf');
    const s = initialStageState({
      stage: 1,
      shape,
      arbiter: arbiterFor(policy, 32),
      settleBeforeArbitration: true,
    });
    assert.deepEqual(actions(stageStep(s, { type: 'start', iteration: 0 }, 0)), ['arbitrate later']);
    assert.deepEqual(actions(stageStep(s, { type: 'input', iteration: 0, mb: 0, chunk: 0 }, 0)), []);
    assert.deepEqual(actions(stageStep(s, { type: 'arbitrate' }, 0)), ['run F0']);
    // F0 ends as F1's input and B0's gradient arrive: one request, and then bf takes B0.
    assert.deepEqual(actions(stageStep(s, { type: 'done', iteration: 0, task: task('F', 0) }, 5)), [
      'send activation F0->2',
      'arbitrate later',
    ]);
    assert.deepEqual(actions(stageStep(s, { type: 'input', iteration: 0, mb: 1, chunk: 0 }, 5)), []);
    assert.deepEqual(actions(stageStep(s, { type: 'grad', iteration: 0, mb: 0, chunk: 0 }, 5)), []);
    assert.deepEqual(actions(stageStep(s, { type: 'arbitrate' }, 5)), ['run B0']);
    // While a task runs, arrivals ask for nothing.
    assert.deepEqual(actions(stageStep(s, { type: 'grad', iteration: 0, mb: 1, chunk: 0 }, 6)), []);
  });

  it('tells the arbiter the first microbatch with a task left, which only grows within an iteration', () => {
    const policy = resolvePolicy('bf');
    const seen: (number | undefined)[] = [];
    const arbiter = arbiterFor(policy, 32);
    const one: PipelineShape = { stages: 1, chunks: 1, microbatches: 3, splitBackward: false };
    const s = initialStageState({
      stage: 0,
      shape: one,
      arbiter: {
        ...arbiter,
        pick: (ready, memo, ctx) => (seen.push(ctx.firstUnfinished), arbiter.pick(ready, memo, ctx)),
      },
    });
    stageStep(s, { type: 'start', iteration: 0 }, 0);
    let fx = [0, 1, 2].flatMap((mb) => stageStep(s, { type: 'input', iteration: 0, mb, chunk: 0 }, 0));
    const ran: string[] = [];
    for (
      let run = fx.find((f) => f.type === 'run');
      run && run.type === 'run';
      run = fx.find((f) => f.type === 'run')
    ) {
      ran.push(`${formatTask(run.task)}:${seen[seen.length - 1]}`);
      fx = stageStep(s, { type: 'done', iteration: 0, task: run.task }, 1);
    }
    assert.deepEqual(ran, ['F0:0', 'B0:0', 'F1:1', 'B1:1', 'F2:2', 'B2:2']);
  });

  describe("a policy's pick that is not a task of the pipeline", () => {
    // P = 1, M = 2: F0 ran, so B0 is ready. F2 (microbatch 2 of 2) has B0's dense index.
    const one: PipelineShape = { stages: 1, chunks: 1, microbatches: 2, splitBackward: false };
    const picking = (pick: (ready: readonly Task[]) => unknown): HintPolicy => ({
      ...bf,
      name: 'odd',
      choose: (ready) => (ready.B.length > 0 ? pick(ready.B) : (ready.F[0] ?? null)) as Task | null,
    });
    const afterF0 = (policy: HintPolicy) => {
      const s = initialStageState({ stage: 0, shape: one, arbiter: arbiterFor(policy, 32) });
      stageStep(s, { type: 'start', iteration: 0 }, 0);
      stageStep(s, { type: 'input', iteration: 0, mb: 0, chunk: 0 }, 0);
      return () => stageStep(s, { type: 'done', iteration: 0, task: task('F', 0) }, 1);
    };
    const cases: [string, (ready: readonly Task[]) => unknown, RegExp][] = [
      [
        "an out-of-range microbatch whose index is a ready task's",
        () => ({ kind: 'F', mb: 2, chunk: 0 }),
        /returned \{"kind":"F","mb":2,"chunk":0\}, which is not a task of this pipeline \(mb must be an integer from 0 to 1\)/,
      ],
      [
        'undefined',
        () => undefined,
        /returned undefined, which is not a task of this pipeline \(not a task object\); a policy returns a ready task or null to wait/,
      ],
      ['a kind the shape has not', (b) => ({ ...b[0], kind: 'W' }), /kind must be F, B/],
      ['a microbatch given as text', (b) => ({ ...b[0], mb: '0' }), /mb must be an integer/],
      ['a chunk out of range', (b) => ({ ...b[0], chunk: 1 }), /chunk must be an integer from 0 to 0/],
    ];
    for (const [what, pick, re] of cases)
      it(`refuses ${what}, naming the stage and the policy, before it runs anything`, () =>
        assert.throws(
          afterF0(picking(pick)),
          (e: Error) =>
            e.name === 'PolicyError' && /^stage 0: policy odd returned /.test(e.message) && re.test(e.message),
        ));

    it('runs its own copy of a valid pick, so the policy changing its object later changes nothing', () => {
      let given: { kind: string; mb: number; chunk: number } | undefined;
      const fx = afterF0(picking((b) => (given = { ...b[0] })))();
      given!.mb = 1;
      assert.deepEqual(actions(fx), ['run B0']);
    });
  });
});
