import { strict as assert } from 'assert';
import {
  agreedTask,
  closeRound,
  initialTpState,
  mayPropose,
  needsAgreement,
  notePeerRound,
  openRound,
} from '../stage/tp-coordination';
import { parseTask } from '../policies/task';
import { arbiterFor } from '../policies/arbiter';
import { resolvePolicy } from '../policies/registry';
import { stageStep } from '../stage/stage-logic';
import { StageEffect, initialStageState } from '../stage/stage-state';
import { laneStageStats } from '../checks/lanes';

const t = parseTask;

describe('tensor-parallel coordination (RRFP appendix D), without actors', () => {
  it('asks for agreement before F and B of a group wider than one rank, never before W', () => {
    assert.equal(needsAgreement(t('F3'), { ranks: 2, rank: 0 }), true);
    assert.equal(needsAgreement(t('B3@1'), { ranks: 4, rank: 3 }), true);
    assert.equal(needsAgreement(t('W3'), { ranks: 2, rank: 1 }), false);
    assert.equal(needsAgreement(t('F3'), { ranks: 1, rank: 0 }), false);
    assert.equal(needsAgreement(t('F3'), undefined), false);
  });

  it('agrees only when every rank proposed the same task', () => {
    const cases: [string[], string | null][] = [
      [['F1', 'F1'], 'F1'],
      [['B2@1', 'B2@1', 'B2@1', 'B2@1'], 'B2@1'],
      [['F1', 'F2'], null],
      [['B0', 'F1', 'B0'], null],
      [['F1@0', 'F1@1'], null],
    ];
    for (const [cands, want] of cases) {
      const got = agreedTask(cands.map(t));
      assert.equal(
        got ? `${got.kind}${got.mb}@${got.chunk}` : null,
        want ? `${t(want).kind}${t(want).mb}@${t(want).chunk}` : null,
        cands.join(','),
      );
    }
  });

  it('after a deferral retries only once its ready set changed or a peer opened the next round', () => {
    const s = initialTpState();
    assert.equal(mayPropose(s), true);
    assert.equal(openRound(s, 0, t('F2'), 1), 0);
    assert.equal(mayPropose(s), false, 'one round at a time');
    assert.equal(closeRound(s, 0, [t('F2'), t('F1')]), null);
    assert.equal(s.deferrals, 1);
    assert.equal(mayPropose(s), false, 'nothing changed');
    s.version++;
    assert.equal(mayPropose(s), true, 'an arrival');
    const p = initialTpState();
    openRound(p, 0, t('F2'), 1);
    closeRound(p, 0, [t('F2'), t('F1')]);
    notePeerRound(p, 0);
    assert.equal(mayPropose(p), false, 'a peer in the round just closed');
    notePeerRound(p, 1);
    assert.equal(mayPropose(p), true, "a peer's next round");
    openRound(p, 0, t('F1'), 2);
    assert.deepEqual(closeRound(p, 1, [t('F1'), t('F1')]), t('F1'));
    assert.equal(p.deferredAt, null);
  });

  it('refuses an answer for a round that is not open', () => {
    const s = initialTpState();
    assert.throws(() => closeRound(s, 0, [t('F0')]), /no round is open/);
    openRound(s, 0, t('F0'), 0);
    assert.throws(() => closeRound(s, 3, [t('F0')]), /round 0 is open/);
  });

  it('in the stage transition: proposes without consuming the candidate, keeps the hint-order memory on a deferral, runs on agreement', () => {
    const shape = { stages: 2, chunks: 1, microbatches: 4, splitBackward: false };
    const arbiter = arbiterFor(resolvePolicy('bf'), 32);
    const s = initialStageState({ stage: 0, shape, arbiter, tp: { ranks: 2, rank: 0 } });
    const kinds = (fx: StageEffect[]) => fx.map((f) => (f.type === 'event' ? `event:${f.event.type}` : f.type));
    stageStep(s, { type: 'start', iteration: 0 }, 0);
    let fx = stageStep(s, { type: 'input', iteration: 0, mb: 1, chunk: 0 }, 1);
    assert.deepEqual(
      kinds(fx).filter((k) => k === 'propose'),
      ['propose'],
    );
    const memo = s.current!.memo;
    assert.ok(s.current!.ready.has(t('F1')), 'the candidate stays ready while the round is open');
    fx = stageStep(s, { type: 'input', iteration: 0, mb: 0, chunk: 0 }, 2);
    assert.ok(!kinds(fx).includes('propose'), 'no second proposal while a round is open');
    fx = stageStep(s, { type: 'tp-result', round: 0, candidates: [t('F1'), t('F0')], peersIn: 1 }, 3);
    assert.ok(!kinds(fx).includes('run'), 'no rank enters a task the group did not agree on');
    assert.equal(s.current!.memo, memo, 'the arbitration state did not advance');
    // The ready set changed (F0 arrived) during the round: the retry comes at once, from the same hint order.
    const retry = fx.find((f) => f.type === 'propose');
    assert.ok(retry && retry.type === 'propose' && retry.round === 1 && retry.task.mb === 0, JSON.stringify(fx));
    fx = stageStep(s, { type: 'tp-result', round: 1, candidates: [t('F0'), t('F0')], peersIn: 3 }, 4);
    assert.deepEqual(
      kinds(fx).filter((k) => k === 'run'),
      ['run'],
    );
    const waits = fx.flatMap((f) => (f.type === 'event' && f.event.type === 'wait' ? [f.event.reason] : []));
    assert.deepEqual(waits, ['tp-coord']);
    assert.equal(s.tp!.deferrals, 1);
  });

  it("splits an open round into the wait for a peer's proposal and the all-gather's own time: proposed at 0, the peer's in at 5, answered at 6 gives peer wait 5 and coordination 1", () => {
    const shape = { stages: 1, chunks: 1, microbatches: 2, splitBackward: false };
    const arbiter = arbiterFor(resolvePolicy('bf'), 32);
    const s = initialStageState({ stage: 0, shape, arbiter, tp: { ranks: 2, rank: 1 } });
    stageStep(s, { type: 'start', iteration: 0 }, 0);
    const proposed = stageStep(s, { type: 'input', iteration: 0, mb: 0, chunk: 0 }, 0);
    assert.ok(proposed.some((f) => f.type === 'propose'));
    const fx = stageStep(s, { type: 'tp-result', round: 0, candidates: [t('F0'), t('F0')], peersIn: 5 }, 6);
    const events = fx.flatMap((f) => (f.type === 'event' ? [{ ...f.event, rank: 1, replica: 0 }] : []));
    const waits = events.flatMap((e) => (e.type === 'wait' ? [[e.reason, e.t, e.ms]] : []));
    assert.deepEqual(waits, [
      ['tp-peer', 0, 5],
      ['tp-coord', 5, 1],
    ]);
    const [stats] = laneStageStats(events, () => true);
    assert.equal(stats.tp_peer_wait_ms, 5);
    assert.equal(stats.tp_coordination_ms, 1);
    assert.equal(stats.blocking_ms, 0, 'neither part is blocking');
  });

  it('has no peer wait when the peers proposed before this rank: the whole round is coordination', () => {
    const shape = { stages: 1, chunks: 1, microbatches: 2, splitBackward: false };
    const arbiter = arbiterFor(resolvePolicy('bf'), 32);
    const s = initialStageState({ stage: 0, shape, arbiter, tp: { ranks: 2, rank: 0 } });
    stageStep(s, { type: 'start', iteration: 0 }, 0);
    stageStep(s, { type: 'input', iteration: 0, mb: 0, chunk: 0 }, 4);
    const fx = stageStep(s, { type: 'tp-result', round: 0, candidates: [t('F0'), t('F0')], peersIn: 2 }, 7);
    const waits = fx.flatMap((f) =>
      f.type === 'event' && f.event.type === 'wait' ? [[f.event.reason, f.event.t, f.event.ms]] : [],
    );
    assert.deepEqual(waits, [['tp-coord', 4, 3]]);
  });
});
