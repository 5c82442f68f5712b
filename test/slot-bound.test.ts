import { strict as assert } from 'assert';
import { resolveConfig, JobConfig } from '../job/config';
import { runJob, summarize } from '../job/run-local';
import { checkJob } from '../job/wire-stage';
import { DurationModel } from '../models/durations';
import { lowerBound } from '../checks/lower-bound';
import { SlotBoundError, inflightCaps, slotBound } from '../checks/slot-bound';
import { BufferLimit } from '../policies/backpressure';
import { policyNames, resolvePolicy } from '../policies/registry';
import { PipelineShape, Task } from '../policies/task';

const sim = (c: Partial<JobConfig>) => runJob(resolveConfig(c), { clock: 'virtual' });

/** Every F takes f, every B b, every W w, every message c: a hand-built instance. */
function fixed(shape: PipelineShape, f: number, b: number, c: number, w = 0): DurationModel {
  return {
    shape,
    compute: (_it: number, _s: number, t: Task) => (t.kind === 'F' ? f : t.kind === 'B' ? b : w),
    comm: () => c,
  } as unknown as DurationModel;
}

describe('slot bound', () => {
  it('equals its closed form s(F+c) + (M((P-s)(F+B) + 2(P-1-s)c) + L(L-1)(F+B)/2)/L + s(B+c) where the limit binds', () => {
    for (const [P, M, L] of [
      [3, 6, 2],
      [4, 8, 1],
      [5, 12, 3],
    ]) {
      const shape = { stages: P, chunks: 1, microbatches: M, splitBackward: false };
      const [F, B, c] = [1, 2, 0.5];
      const sb = slotBound(shape, 0, fixed(shape, F, B, c), new Array(P).fill(L));
      for (let s = 0; s < P; s++) {
        // The ramps: the k-th forward starts after k-1 forwards, the k-th last release ends before k-1 backwards.
        const ramps = ((L * (L - 1)) / 2) * (F + B);
        const closed = s * (F + c) + (M * ((P - s) * (F + B) + 2 * (P - 1 - s) * c) + ramps) / L + s * (B + c);
        assert.ok(
          Math.abs(sb.perStage[s] - closed) < 1e-9,
          `P=${P} M=${M} L=${L} stage ${s}: ${sb.perStage[s]} vs ${closed}`,
        );
      }
      const lb = lowerBound(shape, 0, fixed(shape, F, B, c), new Array(P).fill(L));
      assert.equal(lb.term, 'slot 0', `P=${P} L=${L}`);
      assert.ok(lb.bound > lowerBound(shape, 0, fixed(shape, F, B, c)).bound, 'the limit raises the bound');
    }
  });

  it('is met exactly by one microbatch at a time when the limit is 1 (the round trip M times)', async () => {
    // Uniform without jitter: F 10, B 20, no message time; limit 1 at every stage.
    const s = summarize(await sim({ stages: 4, microbatches: 6, policy: 'bf', bufferLimit: 1 }));
    assert.equal(s.lower_bound_term, 'slot 0');
    assert.ok(Math.abs(s.lower_bound_ms - 6 * 4 * 30) < 1e-9, `bound ${s.lower_bound_ms}`);
    assert.ok(Math.abs(s.makespan_ms - s.lower_bound_ms) < 1e-9, `makespan ${s.makespan_ms}`);
  });

  it('counts the W in the slot and no tail after it with split backward', () => {
    const shape = { stages: 2, chunks: 1, microbatches: 4, splitBackward: true };
    const sb = slotBound(shape, 0, fixed(shape, 1, 2, 0, 3), [1, 1]);
    // Stage 0: round trip 1 + 1 + 2 + 2, then W 3: 9 per microbatch, one at a time.
    assert.equal(sb.perStage[0], 4 * 9);
    // Stage 1: head 1, then F, B, W: 6 per microbatch, no tail.
    assert.equal(sb.perStage[1], 1 + 4 * 6);
  });

  it('takes the later start of the later chunks into account when interleaved', () => {
    const shape = { stages: 2, chunks: 2, microbatches: 1, splitBackward: false };
    // Every task 1 ms, no message time. Stage 1 holds chunk 0 (head 1, round trip 6, tail 1)
    // and chunk 1 (head 3, round trip 2, tail 3). With a cap of 2, both together give
    // 1 + 8/2 + 1 = 6; chunk 1 alone gives 3 + 2/2 + 3 = 7, which the bound takes.
    const sb = slotBound(shape, 0, fixed(shape, 1, 1, 0), [2, 2]);
    assert.equal(sb.perStage[1], 7);
  });

  it('refuses caps that are not one positive integer per stage', () => {
    const shape = { stages: 2, chunks: 1, microbatches: 4, splitBackward: false };
    assert.throws(() => slotBound(shape, 0, fixed(shape, 1, 1, 0), [1]), SlotBoundError);
    assert.throws(
      () => slotBound(shape, 0, fixed(shape, 1, 1, 0), [1, 0]),
      /stage 1's in-flight cap must be a positive integer, got 0/,
    );
  });

  it('gives a binding schedule its own in-flight counts and a non-binding policy the limit', () => {
    const shape = { stages: 4, chunks: 1, microbatches: 8, splitBackward: false };
    assert.deepEqual(inflightCaps(resolvePolicy('1f1b'), shape, 2), [4, 3, 2, 1]);
    assert.deepEqual(inflightCaps(resolvePolicy('bf'), shape, 2), [2, 2, 2, 2]);
    assert.deepEqual(inflightCaps(resolvePolicy('bf'), shape, 'depth'), [4, 3, 2, 1]);
    assert.deepEqual(inflightCaps(resolvePolicy('bf'), { ...shape, chunks: 2 }, 2), [4, 4, 4, 4]);
  });

  it('is never above the makespan over every policy, shape and limit, sync and async, and the caps hold', async function () {
    this.timeout(120000);
    const shapes = [
      { stages: 4, chunks: 1, microbatches: 8 },
      { stages: 3, chunks: 2, microbatches: 6 },
      { stages: 6, chunks: 1, microbatches: 12 },
    ];
    const limits: BufferLimit[] = [1, 2, 4, 'depth'];
    let checked = 0,
      slotSet = 0;
    for (const policy of policyNames())
      for (const shape of shapes)
        for (const bufferLimit of limits)
          for (const [profile, seed] of [
            ['llm', 1],
            ['multimodal', 2],
          ] as const) {
            const cfg = resolveConfig({ ...shape, policy, bufferLimit, profile, jitter: 'paper', seed });
            try {
              checkJob(cfg);
            } catch {
              continue; // a schedule that does not exist for this shape (1f1b interleaved, ...)
            }
            const r = await runJob(cfg, { clock: 'virtual' });
            const s = summarize(r);
            for (const it of s.iterations)
              assert.ok(
                it.makespan_ms >= it.lower_bound_ms - 1e-6,
                `${policy} ${JSON.stringify(shape)} limit ${bufferLimit} ${profile}: makespan ${it.makespan_ms} < bound ${it.lower_bound_ms} (${it.lower_bound_term})`,
              );
            s.peak_inflight.forEach((p, st) =>
              assert.ok(
                p <= s.inflight_caps[st],
                `${policy} ${JSON.stringify(shape)} limit ${bufferLimit}: stage ${st} peak ${p} > cap ${s.inflight_caps[st]}`,
              ),
            );
            checked++;
            if (s.lower_bound_term.startsWith('slot')) slotSet++;
          }
    for (const [policy, bufferLimit] of [
      ['bf', 'depth'],
      ['bf', 2],
      ['1f1b', 'depth'],
    ] as const) {
      const s = summarize(
        await sim({
          stages: 4,
          microbatches: 12,
          policy,
          bufferLimit,
          mode: 'async',
          profile: 'llm',
          jitter: 'paper',
          seed: 3,
        }),
      );
      assert.ok(
        s.makespan_ms >= s.lower_bound_ms - 1e-6,
        `async ${policy} limit ${bufferLimit}: ${s.makespan_ms} < ${s.lower_bound_ms}`,
      );
      checked++;
    }
    assert.ok(checked > 200, `${checked} runs checked`);
    assert.ok(slotSet > 20, `the slot term set the bound in only ${slotSet} runs`);
  });
});
