import { strict as assert } from 'assert';
import { arbiterFor } from '../policies/arbiter';
import { resolvePolicy } from '../policies/registry';
import { decideSwap } from '../policies/swap-rules';
import { checkControl, parsePolicyMessage } from '../actors/policy-messages';
import { encodeValue } from '../transport/codec';
import { parseSwapSchedule } from '../policies/swap-schedule';
import { PipelineShape, formatTask, task } from '../policies/task';
import { PolicySwapEvent } from '../stage/events';
import { stageStep } from '../stage/stage-logic';
import { StageEffect, initialStageState } from '../stage/stage-state';

const shape: PipelineShape = { stages: 2, chunks: 1, microbatches: 3, splitBackward: false };
const arb = (name: string) => arbiterFor(resolvePolicy(name), 32);
const stage0 = (policy: string) => initialStageState({ stage: 0, shape, arbiter: arb(policy) });
const runs = (fx: StageEffect[]) => fx.flatMap((f) => (f.type === 'run' ? [formatTask(f.task)] : []));
const swaps = (fx: StageEffect[]) =>
  fx.flatMap((f) => (f.type === 'event' && f.event.type === 'policy-swap' ? [f.event as PolicySwapEvent] : []));

describe('policy swaps at a stage (pure transitions)', () => {
  it('takes a swap between hint orders at once, and the next pick follows the new order', () => {
    const s = stage0('bf');
    stageStep(s, { type: 'start', iteration: 0 }, 0);
    for (const mb of [0, 1, 2]) stageStep(s, { type: 'input', iteration: 0, mb, chunk: 0 }, 0);
    // bf ran F0 (nothing else ready); F1 and F2 wait. The gradient of 0 arrives while F0 runs.
    stageStep(s, { type: 'done', iteration: 0, task: task('F', 0) }, 1);
    stageStep(s, { type: 'grad', iteration: 0, mb: 0, chunk: 0 }, 1);
    const fx = stageStep(s, { type: 'swap', order: { id: 0, arbiter: arb('f-priority') } }, 2);
    const [e] = swaps(fx);
    assert.deepEqual([e.from, e.to, e.tasks, e.iteration], ['bf', 'f-priority', 2, 0]);
    // F1 is running (bf's pick after F0); at its end f-priority picks F2 over the ready B0.
    assert.deepEqual(runs(stageStep(s, { type: 'done', iteration: 0, task: task('F', 1) }, 3)), ['F2']);
  });

  it('rebuilds a schedule-as-hint policy from the tasks already dispatched this iteration', () => {
    const s = stage0('bf');
    stageStep(s, { type: 'start', iteration: 0 }, 0);
    stageStep(s, { type: 'input', iteration: 0, mb: 0, chunk: 0 }, 0);
    stageStep(s, { type: 'swap', order: { id: 0, arbiter: arb('hint:1f1b') } }, 0);
    // 1F1B at stage 0 of 2: F0 F1 B0 F2 B1 B2. F0 ran already, so F1 is next when it comes.
    stageStep(s, { type: 'done', iteration: 0, task: task('F', 0) }, 1);
    assert.deepEqual(runs(stageStep(s, { type: 'input', iteration: 0, mb: 1, chunk: 0 }, 1)), ['F1']);
  });

  it('holds a swap into a binding schedule until the next iteration starts, and out of it likewise', () => {
    const s = stage0('bf');
    stageStep(s, { type: 'start', iteration: 0 }, 0);
    assert.deepEqual(swaps(stageStep(s, { type: 'swap', order: { id: 0, arbiter: arb('1f1b') } }, 0)), []);
    assert.equal(s.policy.arbiter.name, 'bf');
    // Held back behind it: a later hint swap waits too (swaps are taken in order).
    stageStep(s, { type: 'swap', order: { id: 1, arbiter: arb('fb') } }, 0);
    assert.equal(s.policy.pending.length, 2);
    for (const mb of [0, 1, 2]) stageStep(s, { type: 'input', iteration: 0, mb, chunk: 0 }, 0);
    assert.equal(s.policy.arbiter.name, 'bf');
    // Finish iteration 0 (stage 0 of 2: every B needs its gradient).
    for (const t of ['F0', 'F1', 'F2']) stageStep(s, { type: 'done', iteration: 0, task: task('F', Number(t[1])) }, 1);
    for (const mb of [0, 1, 2]) {
      stageStep(s, { type: 'grad', iteration: 0, mb, chunk: 0 }, 2);
      stageStep(s, { type: 'done', iteration: 0, task: task('B', mb) }, 3);
    }
    const fx = stageStep(s, { type: 'start', iteration: 1 }, 4);
    assert.deepEqual(
      swaps(fx).map((e) => [e.swap, e.from, e.to, e.iteration, e.tasks]),
      [
        [0, 'bf', '1f1b', 1, 6],
        [1, '1f1b', 'fb', 1, 6],
      ],
    );
  });

  it('waits for the iteration a scripted swap names, whatever its kind', () => {
    const s = stage0('bf');
    stageStep(s, { type: 'swap', order: { id: 0, arbiter: arb('fb'), atIteration: 1 } }, 0);
    stageStep(s, { type: 'start', iteration: 0 }, 0);
    assert.equal(s.policy.arbiter.name, 'bf');
    assert.equal(s.policy.pending.length, 1);
  });
});

describe('whether a job takes a swap (decideSwap)', () => {
  const job = { mode: 'sync' as const, nextIteration: 3, lastIteration: 5 };
  const p = resolvePolicy;
  const cases: [string, string, typeof job, string | number | undefined][] = [
    ['bf', 'fb', job, undefined],
    ['bf', '1f1b', job, 3],
    ['1f1b', 'bf', job, 3],
    ['bf', '1f1b', { ...job, nextIteration: 6 }, "the job's last iteration is 5"],
    ['bf', 'bfw', job, 'bfw needs splitBackward'],
    ['bf', '1f1b', { ...job, mode: 'async' as unknown as 'sync' }, 'one continuous iteration'],
    ['bf', 'fb', { ...job, tp: 2 } as typeof job, 'not supported in a job with --tp 2 --dp 1'],
    ['bf', 'fb', { ...job, dp: 2 } as typeof job, 'not supported in a job with --tp 1 --dp 2'],
  ];
  for (const [from, to, j, want] of cases)
    it(`${from} -> ${to} at next ${j.nextIteration} of ${j.lastIteration} (${j.mode}): ${want ?? 'at once'}`, () => {
      const d = decideSwap(p(from), p(to), shape, j);
      if (typeof want === 'string') {
        assert.equal(d.accepted, false);
        assert.ok(!d.accepted && d.reason.includes(want), JSON.stringify(d));
      } else assert.deepEqual(d, want === undefined ? { accepted: true } : { accepted: true, atIteration: want });
    });
  it('refuses a scripted iteration that has already started', () => {
    const d = decideSwap(p('bf'), p('fb'), shape, job, { atIteration: 2 });
    assert.ok(!d.accepted && d.reason.includes('already started'));
  });
});

describe('the --swap-at schedule', () => {
  it('parses iterations and names, module paths and hint:<schedule> included', () => {
    assert.deepEqual(parseSwapSchedule('it=2:bf, it=5:hint:1f1b,it=5:./my.js'), [
      { iteration: 2, policy: 'bf' },
      { iteration: 5, policy: 'hint:1f1b' },
      { iteration: 5, policy: './my.js' },
    ]);
    assert.deepEqual(parseSwapSchedule(''), []);
  });
  it('refuses what is not the grammar, and decreasing iterations, quoting the input', () => {
    assert.throws(() => parseSwapSchedule('2:bf'), /"2:bf" in "2:bf" is not it=<iteration>:<policy>/);
    assert.throws(() => parseSwapSchedule('it=3:bf,it=1:fb'), /must not decrease/);
  });
});

describe('the one check of every policy message (checkControl)', () => {
  const ack = { verb: 'ack', stage: 0, swap: 0, iteration: 1, tasks: 3 };
  const sealed = (sender?: string) => ({ required: true, sender });

  it('takes a sealed request from a tool and a sealed ack from a stage process', () => {
    assert.equal(checkControl('j', 'baton.j.policy.set', { verb: 'set' }, sealed('tool:policy')), null);
    assert.equal(checkControl('j', 'baton.j.policy.ack', ack, sealed('launcher')), null);
    assert.equal(checkControl('j', 'baton.j.policy.ack', ack, sealed('node:n1')), null);
    // The in-process bus seals nothing and requires nothing.
    assert.equal(checkControl('j', 'baton.j.policy.ack', ack, { required: false }), null);
  });

  it('refuses, before parsing, what a sealed job did not open a seal of, and an ack a tool sealed', () => {
    assert.match(checkControl('j', 'baton.j.policy.set', { verb: 'set' }, sealed())!, /not sealed under the job key/);
    assert.match(checkControl('j', 'baton.j.policy.ack', ack, sealed('tool:policy'))!, /an ack is a stage's/);
    assert.match(
      parsePolicyMessage('j', 'baton.j.policy.ack', encodeValue(ack), sealed('tool:x')) as string,
      /"tool:x" sealed it/,
    );
    assert.match(checkControl('j', 'baton.k.policy.set', { verb: 'set' }, sealed('launcher'))!, /not on this job/);
  });
});
