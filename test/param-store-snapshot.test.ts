import { strict as assert } from 'node:assert';
import { ActorRuntime } from '../actors/runtime';
import { VirtualClock } from '../base/clock';
import { ASYNC_DEFAULTS } from '../job/defaults';
import { ConsistencyName, StoreMsg, StoreStats, spawnParamStore } from '../actors/param-store';
import { AsyncSnapshot, asyncSnapshotProblem } from '../actors/param-store-snapshot';

const infos = [{ name: 'w', shape: [3] }];
const grad = (mb: number) => new Map([['w', Float32Array.from([0.3 - 0.1 * mb, -0.2, 0.05 * mb])]]);

/**
 * A store of one 3-value parameter under `consistency` fed microbatches `from`..`to`-1 of the
 * stream (in order, one in flight), snapshotting every 2 updates; resumed from `resume` when given.
 */
async function runStore(consistency: ConsistencyName, from: number, to: number, resume?: AsyncSnapshot) {
  const runtime = new ActorRuntime(new VirtualClock());
  const snaps: AsyncSnapshot[] = [];
  const store = spawnParamStore({
    runtime,
    stage: 0,
    inflightBound: 2,
    delay: 1,
    settings: { ...ASYNC_DEFAULTS, consistency, lr: 0.1, warmup: 0, totalUpdates: 20, firstMicrobatch: from },
    params: new Map([['w', Float32Array.from([1, 2, 3])]]),
    infos,
    snapshots: { every: 2, send: (s) => snaps.push(s) },
    ...(resume ? { resume } : {}),
  });
  const ask = <T>(make: (reply: (v: T) => void) => StoreMsg) => runtime.ask<StoreMsg, T>(store, make);
  const forwardWeights: number[][] = [];
  for (let mb = 0; mb < to - from; mb++) {
    const w = await ask<ReadonlyMap<string, Float32Array> | null>((reply) => ({
      type: 'weights',
      purpose: 'forward',
      mb,
      reply,
    }));
    forwardWeights.push([...w!.get('w')!]);
    runtime.send(store, { type: 'forward-ran', mb });
    runtime.send(store, { type: 'backward-ran', mb, grads: grad(from + mb) });
  }
  const params = await ask<Map<string, Float32Array>>((reply) => ({ type: 'params', reply }));
  const stats = await ask<StoreStats>((reply) => ({ type: 'stats', reply }));
  runtime.shutdown();
  return { params: [...params.get('w')!], snaps, stats, forwardWeights };
}

describe('asynchronous snapshots of a parameter store', () => {
  for (const consistency of ['spectrain', 'recovery', 'lwp', 'stash'] as ConsistencyName[])
    it(`${consistency}: a store resumed from its snapshot at update 4 and fed the rest of the stream ends bitwise where the uninterrupted store did`, async () => {
      const whole = await runStore(consistency, 0, 8);
      assert.deepEqual(
        whole.snaps.map((s) => [s.updates, s.next, s.skipped]),
        [
          [2, 2, 0],
          [4, 4, 0],
          [6, 6, 0],
          [8, 8, 0],
        ],
      );
      const at4 = whole.snaps[1];
      assert.equal(asyncSnapshotProblem(at4), null);
      const resumed = await runStore(consistency, 4, 8, at4);
      assert.deepEqual(resumed.params, whole.params);
      // The policy's running state came along: the forwards saw the same (predicted) weights.
      assert.deepEqual(resumed.forwardWeights, whole.forwardWeights.slice(4));
      assert.equal(resumed.stats.updates, 8);
      assert.equal(resumed.stats.staleness.count, 8);
      // The configured policy, in force from the update after the snapshot's.
      assert.deepEqual(resumed.stats.consistencyEras, [{ policy: consistency, fromUpdate: 5, swap: null }]);
    });

  it('skips the microbatches before the stream resumes that the snapshot had not applied, and counts them', async () => {
    const whole = await runStore('spectrain', 0, 4);
    // Resumed from its snapshot at update 2 while the stream resumes at microbatch 5: 2, 3 and 4 are skipped.
    const resumed = await runStore('spectrain', 5, 8, whole.snaps[0]);
    assert.deepEqual(
      resumed.snaps.map((s) => [s.updates, s.next, s.skipped]),
      [[4, 7, 3]],
    );
    assert.equal(resumed.stats.updates, 5);
  });

  it('does not apply again a microbatch below the snapshot it resumed from (the stream resumed at its last one)', async () => {
    const whole = await runStore('inconsistent', 0, 8);
    const resumed = await runStore('inconsistent', 7, 8, whole.snaps[3]);
    assert.deepEqual(resumed.params, whole.params);
    assert.equal(resumed.stats.updates, 8);
  });

  it('adopts a waiting consistency swap when the last backward it waits for is one below the floor, which makes no update', async () => {
    const whole = await runStore('inconsistent', 0, 8);
    const runtime = new ActorRuntime(new VirtualClock());
    const swaps: [number, string, string, number][] = [];
    // The stream resumes at 6, the snapshot has all 8: microbatches 0 and 1 here (6 and 7) are below the floor.
    const store = spawnParamStore({
      runtime,
      stage: 0,
      inflightBound: 2,
      delay: 1,
      settings: {
        ...ASYNC_DEFAULTS,
        consistency: 'inconsistent',
        lr: 0.1,
        warmup: 0,
        totalUpdates: 20,
        firstMicrobatch: 6,
      },
      params: new Map([['w', Float32Array.from([1, 2, 3])]]),
      infos,
      resume: whole.snaps[3],
      onConsistencySwap: (...a) => swaps.push(a),
    });
    const ask = <T>(make: (reply: (v: T) => void) => StoreMsg) => runtime.ask<StoreMsg, T>(store, make);
    const weights = (mb: number) =>
      ask<ReadonlyMap<string, Float32Array> | null>((reply) => ({ type: 'weights', purpose: 'forward', mb, reply }));
    await weights(0);
    runtime.send(store, { type: 'forward-ran', mb: 0 });
    runtime.send(store, { type: 'swap-consistency', swap: 1, to: 'spectrain' });
    await weights(1);
    runtime.send(store, { type: 'forward-ran', mb: 1 });
    runtime.send(store, { type: 'backward-ran', mb: 0, grads: grad(6) });
    const stats = await ask<StoreStats>((reply) => ({ type: 'stats', reply }));
    runtime.shutdown();
    assert.deepEqual(swaps, [[1, 'inconsistent', 'spectrain', 8]]);
    assert.equal(stats.consistency, 'spectrain');
    assert.equal(stats.updates, 8);
  });

  it('refuses a snapshot of other parameters, or whose counts do not add up, naming the stage', async () => {
    const whole = await runStore('spectrain', 0, 2);
    const snap = whole.snaps[0];
    await assert.rejects(
      runStore('spectrain', 2, 4, { ...snap, params: { w: new Float32Array(4) } }),
      /stage 0: the snapshot's parameter w has 4 values, the stage 3/,
    );
    await assert.rejects(runStore('spectrain', 2, 4, { ...snap, skipped: 1 }), /exceed its next microbatch 2/);
    await assert.rejects(runStore('spectrain', 2, 4, { ...snap, staleness: [] }), /one count per update/);
    const v = { ...snap.policy!, arrays: { v: { w: new Float32Array(2) } } };
    await assert.rejects(runStore('spectrain', 2, 4, { ...snap, policy: v }), /spectrain v of w fits no parameter/);
  });
});
