import { strict as assert } from 'node:assert';
import { LocalBus } from '../transport/local-bus';
import { encodeValue } from '../transport/codec';
import { newRejectTally } from '../base/reject-tally';
import { SnapshotKeeper } from '../job/snapshot-keeper';
import { snapshotSender } from '../job/snapshot-send';
import { AsyncSnapshot } from '../actors/param-store-snapshot';

const snapshot = (updates: number, next = updates): AsyncSnapshot => ({
  params: { w: Float32Array.from([updates, 1, 2]) },
  optimizer: [{ kind: 'nadamw', step: updates, m: { w: new Float32Array(3) }, v: { w: new Float32Array(3) } }],
  updates,
  next,
  skipped: 0,
  staleness: new Array<number>(updates).fill(1),
});
const tick = () => new Promise((r) => setImmediate(r));

describe("the launcher's keeper of asynchronous snapshots", () => {
  function setup() {
    const bus = new LocalBus();
    const rejects = newRejectTally();
    const keeper = new SnapshotKeeper(bus, 'j', 2, rejects);
    keeper.follow('L1');
    return { bus, rejects, keeper };
  }

  it("keeps each stage's newest snapshot of the launch it follows, with the bytes and copy times", async () => {
    const { bus, rejects, keeper } = setup();
    snapshotSender(bus, 'j', 0, 'L1')(snapshot(4), 0.5);
    snapshotSender(bus, 'j', 0, 'L1')(snapshot(8), 0.7);
    snapshotSender(bus, 'j', 1, 'L1')(snapshot(8), 0.6);
    // One sent late, older than the one kept: taken, not kept.
    snapshotSender(bus, 'j', 0, 'L1')(snapshot(4), 0.5);
    await tick();
    assert.equal(rejects.count, 0);
    assert.equal(keeper.taken, 4);
    assert.ok(keeper.bytes > 4 * 3 * 4 * 3);
    assert.deepEqual(keeper.copyMs, [0.5, 0.7, 0.6, 0.5]);
    assert.deepEqual(
      keeper.snapshots().map((s) => s?.updates),
      [8, 8],
    );
    assert.deepEqual(keeper.resumeCounts(), [
      { updates: 8, next: 8, skipped: 0 },
      { updates: 8, next: 8, skipped: 0 },
    ]);
    keeper.close();
  });

  it('refuses and counts a snapshot of another launch, from a stage its subject does not name, or malformed', async () => {
    const { bus, rejects, keeper } = setup();
    snapshotSender(bus, 'j', 0, 'L0')(snapshot(4), 0.5);
    await tick();
    keeper.follow(undefined);
    snapshotSender(bus, 'j', 0, 'L1')(snapshot(4), 0.5);
    await tick();
    keeper.follow('L1');
    const state = (stage: number, snap: unknown, extra = {}) =>
      encodeValue({ verb: 'state', job: 'j', stage, updates: 4, copyMs: 1, launch: 'L1', snapshot: snap, ...extra });
    bus.publish('baton.j.state.1', state(0, snapshot(4)));
    bus.publish('baton.j.state.0', state(0, { ...snapshot(4), skipped: 3 }));
    bus.publish('baton.j.state.0', state(0, snapshot(4), { updates: 5 }));
    bus.publish('baton.j.state.0', state(0, snapshot(4), { copyMs: -1 }));
    bus.publish('baton.j.state.0', Uint8Array.from([0xff, 0x00]));
    assert.equal(rejects.count, 7);
    assert.equal(keeper.taken, 0);
    assert.deepEqual(keeper.snapshots(), [undefined, undefined]);
    assert.match(rejects.first.join('\n'), /of launch "L0", not L1/);
    assert.match(rejects.first.join('\n'), /not one taking snapshots/);
    assert.match(rejects.first.join('\n'), /exceed its next microbatch/);
    keeper.close();
  });

  it('waits for the last snapshots of the stages named, and no longer than it is told', async () => {
    const { bus, keeper } = setup();
    const t0 = Date.now();
    setTimeout(() => snapshotSender(bus, 'j', 1, 'L1')(snapshot(5), 0.1, true), 50);
    await keeper.lastOf([1], 5000);
    assert.ok(Date.now() - t0 < 1000);
    assert.equal(keeper.snapshots()[1]?.updates, 5);
    const t1 = Date.now();
    await keeper.lastOf([0], 100);
    // Timers run on the event loop's cached millisecond clock: by Date.now one can fire 1 ms early.
    assert.ok(Date.now() - t1 >= 99, `gave up after ${Date.now() - t1} ms`);
    // Resumed counts hold until a newer snapshot comes.
    keeper.resumed(
      [
        { updates: 0, next: 5, skipped: 5 },
        { updates: 5, next: 5, skipped: 0 },
      ],
      [0, 0],
    );
    assert.deepEqual(keeper.resumeCounts()[0], { updates: 0, next: 5, skipped: 5 });
    assert.deepEqual(keeper.startUpdates(), [0, 5]);
    assert.deepEqual(keeper.belowFloorAtStart(), [0, 0]);
    keeper.close();
  });
});
