import { strict as assert } from 'assert';
import { makeArbiter } from '../actors/job';
import { StageEffect, StageMsg, initialStageState, stageStatus, stageStep } from '../actors/stage-logic';
import { resolvePolicy } from '../policies/registry';
import { PipelineShape, formatTask, task } from '../policies/task';

function stageOf(stage: number, shape: PipelineShape, policyName = 'bf', limit = 32) {
  const policy = resolvePolicy(policyName);
  return initialStageState({ stage, shape: { ...shape, splitBackward: policy.splitBackward }, policy, arbiter: makeArbiter(policy, limit) });
}

const actions = (fx: StageEffect[]) => fx.filter((f) => f.type !== 'event').map((f) =>
  f.type === 'run' ? `run ${formatTask(f.task)}` : f.type === 'send' ? `send ${f.kind} ${formatTask(f.task)}->${f.dst}` : `finished ${f.iteration}`);

describe('stage logic (pure transitions)', () => {
  const shape: PipelineShape = { stages: 3, chunks: 1, microbatches: 2, splitBackward: false };

  it('runs a forward as soon as its input arrives and sends the activation on', () => {
    const s = stageOf(1, shape);
    assert.deepEqual(actions(stageStep(s, { type: 'start', iteration: 0 }, 0)), []);
    assert.deepEqual(actions(stageStep(s, { type: 'input', iteration: 0, mb: 1, chunk: 0 }, 1)), ['run F1']);
    assert.deepEqual(actions(stageStep(s, { type: 'input', iteration: 0, mb: 0, chunk: 0 }, 2)), []);
    assert.deepEqual(actions(stageStep(s, { type: 'done', iteration: 0, task: task('F', 1) }, 5)), ['send activation F1->2', 'run F0']);
  });

  it('makes B ready only when its forward ran here and its gradient arrived', () => {
    const s = stageOf(1, shape);
    stageStep(s, { type: 'start', iteration: 0 }, 0);
    assert.deepEqual(actions(stageStep(s, { type: 'grad', iteration: 0, mb: 0, chunk: 0 }, 0)), []);
    assert.deepEqual(actions(stageStep(s, { type: 'input', iteration: 0, mb: 0, chunk: 0 }, 1)), ['run F0']);
    assert.deepEqual(actions(stageStep(s, { type: 'done', iteration: 0, task: task('F', 0) }, 2)), ['send activation F0->2', 'run B0']);
    assert.deepEqual(actions(stageStep(s, { type: 'done', iteration: 0, task: task('B', 0) }, 3)), ['send gradient B0->0']);
  });

  it('starts B at the loss stage right after its forward, and reports the end of the iteration', () => {
    const s = stageOf(2, shape);
    stageStep(s, { type: 'start', iteration: 0 }, 0);
    stageStep(s, { type: 'input', iteration: 0, mb: 0, chunk: 0 }, 0);
    assert.deepEqual(actions(stageStep(s, { type: 'done', iteration: 0, task: task('F', 0) }, 1)), ['run B0']);
    stageStep(s, { type: 'input', iteration: 0, mb: 1, chunk: 0 }, 1);
    assert.deepEqual(actions(stageStep(s, { type: 'done', iteration: 0, task: task('B', 0) }, 2)), ['send gradient B0->1', 'run F1']);
    assert.deepEqual(actions(stageStep(s, { type: 'done', iteration: 0, task: task('F', 1) }, 3)), ['run B1']);
    assert.deepEqual(actions(stageStep(s, { type: 'done', iteration: 0, task: task('B', 1) }, 4)), ['send gradient B1->1', 'finished 0']);
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
    assert.throws(() => stageStep(s, { type: 'input', iteration: 0, mb: 0, chunk: 0 }, 0), (e: Error) => protocol(e) && /duplicate input/.test(e.message));
    const fx = stageStep(s, { type: 'start', iteration: 0 }, 1);
    assert.deepEqual(actions(fx), ['run F0']);
    assert.equal(fx.filter((f) => f.type === 'event' && f.event.type === 'reject').length, 0);
    assert.throws(() => stageStep(s, { type: 'grad', iteration: 2, mb: 0, chunk: 0 }, 2), (e: Error) => protocol(e) && /more than one ahead/.test(e.message));
    // Arrivals for the next iteration wait, each once.
    for (let mb = 0; mb < shape.microbatches; mb++)
      for (const type of ['input', 'grad'] as const) stageStep(s, { type, iteration: 1, mb, chunk: 0 }, 3);
    assert.throws(() => stageStep(s, { type: 'grad', iteration: 1, mb: 0, chunk: 0 }, 3), (e: Error) => protocol(e) && /duplicate grad/.test(e.message));
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
    for (const m of bad) assert.throws(() => stageStep(s, m, 1), (e: Error) => e.name === 'StageProtocolError' && /stage 1/.test(e.message));
    assert.equal(stageStatus(s).running, 'F0');
  });

  it('starts iterations in order from the job\'s first, each once: a replayed or forged start is refused and the stage stays usable', () => {
    const policy = resolvePolicy('bf');
    const s = initialStageState({ stage: 2, shape, policy, arbiter: makeArbiter(policy, 32), firstIteration: 5 });
    const refused = (it: number, re: RegExp) =>
      assert.throws(() => stageStep(s, { type: 'start', iteration: it }, 0), (e: Error) => e.name === 'StageProtocolError' && re.test(e.message));
    refused(7, /start of iteration 7, expected iteration 5/);
    refused(0, /expected iteration 5/);
    stageStep(s, { type: 'start', iteration: 5 }, 0);
    let fx = [...stageStep(s, { type: 'input', iteration: 5, mb: 0, chunk: 0 }, 1), ...stageStep(s, { type: 'input', iteration: 5, mb: 1, chunk: 0 }, 1)];
    const ran: string[] = [];
    for (let run = fx.find((f) => f.type === 'run'); run && run.type === 'run'; run = fx.find((f) => f.type === 'run')) {
      ran.push(formatTask(run.task));
      fx = stageStep(s, { type: 'done', iteration: 5, task: run.task }, 2);
    }
    assert.deepEqual(ran, ['F0', 'B0', 'F1', 'B1']);
    assert.ok(fx.some((f) => f.type === 'finished' && f.iteration === 5));
    refused(5, /start of iteration 5, expected iteration 6/);
    refused(9, /expected iteration 6/);
    stageStep(s, { type: 'start', iteration: 6 }, 5);
    assert.equal(stageStatus(s).iteration, 6);
  });

  it('refuses, before its first start, arrivals for another iteration and duplicates, so none is recorded or taken', () => {
    const policy = resolvePolicy('bf');
    const s = initialStageState({ stage: 1, shape, policy, arbiter: makeArbiter(policy, 32), firstIteration: 3 });
    const early = (iteration: number, mb: number) => () => stageStep(s, { type: 'input', iteration, mb, chunk: 0 }, 0);
    assert.throws(early(7, 0), /input for iteration 7 before the first, 3, has started/);
    assert.throws(early(2, 0), /before the first, 3, has started/);
    early(3, 0)();
    assert.throws(early(3, 0), /duplicate input for F0 of iteration 3 before its start/);
    stageStep(s, { type: 'start', iteration: 3 }, 1);
    assert.deepEqual(stageStatus(s).running, 'F0');
    // One iteration on: an early duplicate for the next is refused as it comes, too.
    stageStep(s, { type: 'input', iteration: 4, mb: 1, chunk: 0 }, 2);
    assert.throws(() => stageStep(s, { type: 'input', iteration: 4, mb: 1, chunk: 0 }, 2), /duplicate input for F1 of iteration 4/);
  });

  it('drains backward-only at the buffer limit', () => {
    const s = stageOf(0, { stages: 2, chunks: 1, microbatches: 4, splitBackward: false }, 'f-priority', 2);
    stageStep(s, { type: 'start', iteration: 0 }, 0);
    for (let j = 0; j < 4; j++) stageStep(s, { type: 'input', iteration: 0, mb: j, chunk: 0 }, 0);
    assert.deepEqual(actions(stageStep(s, { type: 'done', iteration: 0, task: task('F', 0) }, 1)), ['send activation F0->1', 'run F1']);
    assert.deepEqual(actions(stageStep(s, { type: 'done', iteration: 0, task: task('F', 1) }, 2)), ['send activation F1->1']);
    assert.equal(stageStatus(s).inflight, 2);
    assert.deepEqual(actions(stageStep(s, { type: 'grad', iteration: 0, mb: 1, chunk: 0 }, 3)), ['run B1']);
    assert.deepEqual(actions(stageStep(s, { type: 'done', iteration: 0, task: task('B', 1) }, 4)), ['run F2']);
  });
});
