import { strict as assert } from 'assert';
import { TRAIN_FLAGS } from '../cli/train-flags';
import { trainConfigsFromFlags } from '../cli/train-setup';
import { parseFlags } from '../cli/args';
import { pipemareHorizon } from '../actors/param-store';

describe('train flags of asynchronous mode', () => {
  const cfgOf = (...argv: string[]) => trainConfigsFromFlags(parseFlags(argv, TRAIN_FLAGS, 'train').flags).cfg;

  it('counts warmup and the schedule in updates, M per iteration, since every microbatch updates', () => {
    const a = cfgOf('--model', 'mlp', '--mode', 'async', '--microbatches', '8', '--iterations', '10', '--warmup', '3');
    assert.equal(a.async.totalUpdates, 80);
    assert.equal(a.async.warmup, 24);
    const s = cfgOf('--model', 'mlp', '--microbatches', '8', '--iterations', '10', '--warmup', '3');
    assert.equal(s.train!.warmup, 3, 'synchronous mode steps once per iteration');
  });

  it("leaves PipeMare's damping off unless asked, and then damps over 3/4 of the updates", () => {
    // 100 iterations of 4 microbatches: 400 updates.
    const pipemare = (...extra: string[]) =>
      cfgOf(
        '--model',
        'mlp',
        '--mode',
        'async',
        '--consistency',
        'pipemare',
        ...extra,
        '--microbatches',
        '4',
        '--iterations',
        '100',
      );
    const off = pipemare();
    assert.equal(off.async.pipemareDamping, false);
    const on = pipemare('--pipemare-damping');
    assert.equal(on.async.pipemareDamping, true);
    assert.equal(on.async.pipemareSteps, 300);
    assert.equal(pipemareHorizon(1), 1);
    assert.throws(
      () => cfgOf('--model', 'mlp', '--mode', 'async', '--consistency', 'fresco', '--pipemare-damping'),
      /--pipemare-damping needs --mode async --consistency pipemare/,
    );
    assert.throws(
      () => cfgOf('--model', 'mlp', '--pipemare-damping'),
      /--pipemare-damping needs --mode async --consistency pipemare/,
    );
  });

  it("keeps activations by default, and maps --lrd, --backward recompute and --control-stages onto the stores' settings", () => {
    const d = cfgOf('--model', 'mlp', '--mode', 'async', '--consistency', 'lwp', '--microbatches', '4');
    assert.deepEqual([d.async.backward, d.async.lrd, d.async.consistency], ['kept', false, 'lwp']);
    const s = cfgOf(
      ...['--model', 'mlp', '--mode', 'async', '--consistency', 'projection-control', '--lrd'],
      ...['--backward', 'recompute', '--control-stages', '8', '--microbatches', '4'],
    );
    assert.deepEqual([s.async.backward, s.async.lrd, s.async.controlStages], ['recompute', true, 8]);
  });
});
