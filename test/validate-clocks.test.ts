import { strict as assert } from 'assert';
import { runJob } from '../job/run-local';
import { validateRun } from '../checks/validate';
import type { BatonEvent, ReceiveEvent } from '../stage/events';
import { bfUniform } from './helpers-job';

describe('validating a run whose stages ran on several clocks', () => {
  it('checks each receive against its send between stages of one clock, and only there', async () => {
    const cfg = bfUniform('clocks', 3, 4, { iterations: 1 });
    const r = await runJob(cfg, { clock: 'virtual' });
    const shape = r.shape;
    const iterations = cfg.warmupIterations + cfg.iterations;
    // Doctored: stage 1 says it received microbatch 2's activation before stage 0 sent it.
    const send = r.events.find((e) => e.type === 'send' && e.stage === 0 && e.mb === 2 && e.kind === 'activation')!;
    const events: BatonEvent[] = r.events.map((e) =>
      e.type === 'receive' && e.stage === 1 && e.mb === 2 && e.kind === 'activation'
        ? ({ ...e, t: send.t - 0.5 } as ReceiveEvent)
        : e,
    );
    const oneMachine = validateRun(events, shape, iterations, { sharedClock: false, clockOf: () => 'host-a' });
    assert.equal(oneMachine.length, 1, oneMachine.join('\n'));
    assert.match(
      oneMachine[0],
      /stage 1, iteration 0, F2: its activation arrived at .*, before stage 0 sent it \(.*\) on the same clock/,
    );
    // Stages 0 and 1 on different machines: their clocks cannot be compared, and are not.
    assert.deepEqual(
      validateRun(events, shape, iterations, { sharedClock: false, clockOf: (s) => (s === 0 ? 'a' : 'b') }),
      [],
    );
    assert.deepEqual(validateRun(r.events, shape, iterations, { sharedClock: false, clockOf: () => 'host-a' }), []);
  });
});
