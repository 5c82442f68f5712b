import { strict as assert } from 'node:assert';
import { StateKeeper } from '../job/state-keeper';
import { LocalBus } from '../transport/local-bus';
import { encodeValue } from '../transport/codec';
import { subject } from '../transport/subjects';
import { newRejectTally } from '../base/reject-tally';

const snap = (x: number) => ({ params: { w: Float32Array.from([x]) }, optimizer: [{ step: x, m: {}, v: {} }] });

describe('StateKeeper (the launcher keeps the states sent every N flushes)', () => {
  const setUp = () => {
    const bus = new LocalBus();
    const rejects = newRejectTally();
    const keeper = new StateKeeper(bus, 'j', 2, rejects);
    keeper.follow('L1');
    const send = (stage: number, iteration: number, launch = 'L1') =>
      bus.publish(
        subject('j', 'state', stage),
        encodeValue({ verb: 'state', job: 'j', stage, iteration, snapshot: snap(iteration), launch }),
      );
    return { keeper, rejects, send };
  };

  it('resumes after the newest flush every stage sent, however far apart the flushes are', () => {
    const { keeper, send } = setUp();
    for (const it of [7, 15, 23]) [0, 1].forEach((s) => send(s, it));
    // Stage 1 lost between its report and its state at flush 31: the one before is complete.
    send(0, 31);
    const p = keeper.resumePoint(35);
    assert.equal(p?.next, 24);
    assert.equal((p?.states[1].params.w as Float32Array)[0], 23);
    assert.equal(keeper.resumePoint(16)?.next, 16);
    assert.equal(keeper.resumePoint(8), null, 'flush 7 was let go: three are kept');
    assert.equal(keeper.taken, 7);
  });

  it("forgets the flushes a replay makes again, and refuses another launch's states, counted", () => {
    const { keeper, rejects, send } = setUp();
    for (const it of [3, 7]) [0, 1].forEach((s) => send(s, it));
    keeper.dropFrom(4);
    assert.equal(keeper.resumePoint(100)?.next, 4);
    send(0, 11, 'L0');
    assert.equal(rejects.count, 1);
    assert.match(rejects.first[0], /state refused: of launch "L0", not L1/);
  });
});
