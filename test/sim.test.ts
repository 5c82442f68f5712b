import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { resolveConfig, JobConfig } from '../job/config';
import { commHoldMs } from '../actors/receiver';
import { DeadlockError, describeDeadlock } from '../checks/deadlock';
import { runJob, summarize } from '../job/run-local';
import { durationModelFor } from '../job/wire-stage';
import { validateRun } from '../checks/validate';
import { BatonEvent } from '../stage/events';
import { policyNames } from '../policies/registry';
import { Bus } from '../transport/bus';
import { LocalBus } from '../transport/local-bus';
import { subject } from '../transport/subjects';
import { idleStatus } from './helpers-stage';

const sim = (c: Partial<JobConfig>) => runJob(resolveConfig(c), { clock: 'virtual' });

const FIXED = ['gpipe', '1f1b', 'interleaved-1f1b', 'zb-h1'];
const HINTS = ['bf', 'fb', 'b-priority', 'f-priority', 'bfw'];
const ALL = [...HINTS, ...FIXED, ...FIXED.map((s) => `hint:${s}`)];

describe('simulation on the virtual clock (the real actors)', function () {
  this.timeout(300000);

  it('knows every policy the sweep uses', () => {
    for (const p of ALL) assert.ok(policyNames().includes(p), `missing policy ${p}`);
  });

  it('completes and validates every policy over the shape sweep, or refuses the shape clearly', async () => {
    let ran = 0;
    let refused = 0;
    for (const P of [1, 2, 3, 4, 8])
      for (const V of [1, 2])
        for (const M of [1, 3, 4, 8, 13])
          for (const policy of ALL) {
            const cfg = {
              stages: P,
              chunks: V,
              microbatches: M,
              policy,
              jitter: 'paper' as const,
              seed: P * 100 + M,
              bufferLimit: 4,
            };
            try {
              const r = await sim(cfg);
              assert.equal(
                r.totals.tasks,
                P * V * M * (r.shape.splitBackward ? 3 : 2),
                `${policy} P=${P} V=${V} M=${M}`,
              );
              ran++;
            } catch (e) {
              assert.equal((e as Error).name, 'ShapeError', `${policy} P=${P} V=${V} M=${M}: ${(e as Error).message}`);
              assert.match((e as Error).message, /\d/, 'a refusal names the numbers');
              refused++;
            }
          }
    assert.equal(ran + refused, 5 * 2 * 5 * ALL.length);
    assert.ok(ran >= 450, `ran ${ran}`);
    assert.ok(refused > 0, 'interleaved-1f1b refuses M not a multiple of P');
  });

  /** (P, M) pairs of the closed-form checks: M a multiple of P, M ≫ P, and neither. */
  const SHAPES = [
    [4, 8],
    [8, 32],
    [3, 13],
  ];

  it('gives binding gpipe and 1f1b exactly (M+P-1)(F+B) on uniform without jitter', async () => {
    for (const [P, M] of [...SHAPES, [8, 3]]) {
      for (const policy of ['gpipe', '1f1b']) {
        const s = summarize(await sim({ stages: P, microbatches: M, policy, profile: 'uniform' }));
        assert.equal(s.makespan_ms, (M + P - 1) * 30, `${policy} P=${P} M=${M}`);
      }
    }
  });

  it('keeps bf within 1% of (M+P-1)(F+B) on uniform without jitter', async () => {
    for (const [P, M] of [...SHAPES, [8, 64]]) {
      const s = summarize(await sim({ stages: P, microbatches: M, policy: 'bf' }));
      assert.ok(s.makespan_ms <= (M + P - 1) * 30 * 1.01, `bf P=${P} M=${M}: ${s.makespan_ms}`);
    }
  });

  it('matches the interleaved 1F1B closed form M(F+B) + (P-1)(F+B)/V where M is a multiple of P', async () => {
    for (const [P, V, M] of [
      [2, 2, 4],
      [4, 2, 8],
      [4, 2, 16],
      [8, 2, 16],
      [4, 4, 8],
    ]) {
      const s = summarize(await sim({ stages: P, chunks: V, microbatches: M, policy: 'interleaved-1f1b' }));
      assert.ok(
        Math.abs(s.makespan_ms - (M * 30 + ((P - 1) * 30) / V)) < 1e-6,
        `P=${P} V=${V} M=${M}: ${s.makespan_ms}`,
      );
    }
  });

  it('bounds peak in-flight by the buffer limit (non-interleaved) and by limit + V (interleaved)', async () => {
    for (const limit of [1, 2, 4])
      for (const P of [1, 2, 3, 4, 8])
        for (const V of [1, 2])
          for (const M of [1, 3, 4, 8, 13])
            for (const policy of HINTS) {
              const r = await sim({
                stages: P,
                chunks: V,
                microbatches: M,
                policy,
                bufferLimit: limit,
                jitter: 'paper',
                seed: limit + M,
              });
              const peak = Math.max(...r.totals.peakInflight);
              assert.ok(peak <= limit + (V > 1 ? V : 0), `${policy} limit=${limit} P=${P} V=${V} M=${M}: peak ${peak}`);
            }
  });

  it('is deterministic: the same seed gives identical traces', async () => {
    for (const [policy, chunks] of [
      ['bf', 2],
      ['hint:1f1b', 1],
      ['bfw', 1],
      ['interleaved-1f1b', 2],
    ] as const) {
      const run = (seed: number) =>
        sim({ stages: 4, microbatches: 8, chunks, policy, jitter: 'paper', seed, iterations: 2 });
      const a = await run(7);
      assert.deepEqual((await run(7)).events, a.events, policy);
      assert.notDeepEqual((await run(8)).events, a.events, policy);
    }
  });

  it('holds a message for what is left of its drawn time after the send, never more', () => {
    assert.equal(commHoldMs(100, 5, 100), 5, 'no time in transit: the whole drawn time');
    assert.equal(commHoldMs(100, 5, 103), 2, '3 ms in transit count');
    assert.equal(commHoldMs(100, 5, 140), 0, 'waited in the socket during a 40 ms blocking task: not held again');
    assert.equal(commHoldMs(100, 5, 90), 5, 'a sender clock ahead of ours: at most the drawn time');
    assert.equal(commHoldMs(100, 0, 100), 0);
  });

  it('delivers every message exactly its drawn communication time after the send (held by the receiver)', async () => {
    const cfg = resolveConfig({
      stages: 4,
      microbatches: 8,
      chunks: 2,
      policy: 'bf',
      jitter: 'paper',
      seed: 5,
      profile: 'llm',
    });
    const r = await runJob(cfg, { clock: 'virtual' });
    const durations = durationModelFor(cfg, { stages: 4, chunks: 2, microbatches: 8, splitBackward: false });
    const sends = new Map<string, number>();
    for (const e of r.events) if (e.type === 'send') sends.set(`${e.stage}|${e.seq}`, e.t);
    let checked = 0;
    for (const e of r.events) {
      if (e.type !== 'receive' || e.kind === 'data') continue;
      const sentAt = sends.get(`${e.src}|${e.seq}`);
      assert.ok(sentAt !== undefined, `receive of seq ${e.seq} from stage ${e.src} without its send`);
      // The sender's task: activations come from F of the previous virtual stage, gradients from B of the next.
      const srcChunk =
        e.kind === 'activation' ? (e.src === 3 ? e.chunk - 1 : e.chunk) : e.src === 0 ? e.chunk + 1 : e.chunk;
      const want = durations.comm(e.iteration, e.src, {
        kind: e.kind === 'activation' ? 'F' : 'B',
        mb: e.mb,
        chunk: srcChunk,
      });
      assert.ok(
        Math.abs(e.t - sentAt - want) < 1e-9,
        `${e.kind} mb ${e.mb} ${e.src}->${e.stage}: latency ${e.t - sentAt}, drawn ${want}`,
      );
      assert.ok(Math.abs(e.latency - want) < 1e-9);
      checked++;
    }
    assert.equal(checked, 8 * (2 * 4 - 1) * 2, 'every activation and gradient between virtual stages');
  });

  it('shows every policy exactly the same realized durations for a seed', async () => {
    const durationsOf = async (policy: string) => {
      const r = await sim({ stages: 4, microbatches: 8, policy, jitter: 'paper', seed: 3, profile: 'llm' });
      const start = new Map<string, number>();
      const d = new Map<string, number>();
      for (const e of r.events) {
        const k = `${e.stage}|${'kind' in e ? e.kind : ''}|${'mb' in e ? e.mb : ''}`;
        if (e.type === 'task-start') start.set(k, e.t);
        if (e.type === 'task-end') d.set(k, +(e.t - start.get(k)!).toFixed(9));
      }
      return d;
    };
    const base = await durationsOf('bf');
    for (const p of ['fb', 'f-priority', '1f1b', 'gpipe']) assert.deepEqual(await durationsOf(p), base, p);
  });

  it('never beats the lower bound', async () => {
    for (const profile of ['uniform', 'llm', 'multimodal'])
      for (const jitter of ['none', 'compute', 'paper'] as const)
        for (const policy of ['bf', 'f-priority', '1f1b', 'gpipe', 'bfw', 'zb-h1'])
          for (const seed of [1, 2]) {
            const r = await sim({ stages: 4, microbatches: 12, policy, profile, jitter, seed, iterations: 2 });
            for (const it of r.iterations)
              assert.ok(
                it.makespan_ms >= it.lower_bound_ms - 1e-6,
                `${policy} ${profile} ${jitter}: ${it.makespan_ms} < ${it.lower_bound_ms}`,
              );
          }
    for (const V of [2, 3])
      for (const policy of ['bf', 'interleaved-1f1b', 'hint:interleaved-1f1b'])
        for (const jitter of ['none', 'paper'] as const) {
          const r = await sim({
            stages: 4,
            chunks: V,
            microbatches: 12,
            policy,
            profile: 'llm',
            jitter,
            seed: V,
            iterations: 2,
          });
          for (const it of r.iterations)
            assert.ok(
              it.makespan_ms >= it.lower_bound_ms - 1e-6,
              `${policy} V=${V} ${jitter}: ${it.makespan_ms} < ${it.lower_bound_ms}`,
            );
        }
  });

  it('arbitrates once everything due at an instant has arrived: bf runs the backward that arrives as its forward ends', async () => {
    // Uniform P=4, M=8: at t=60 stage 2 ends F3, and F4's activation and B0's gradient both
    // arrive. The last task was a forward, so bf's round starts with the ready backward.
    const r = await sim({ stages: 4, microbatches: 8, policy: 'bf' });
    const order = r.events
      .filter((e) => e.type === 'task-start' && e.stage === 2)
      .map((e) => `${e.type === 'task-start' ? `${e.kind}${e.mb}@${e.t}` : ''}`);
    assert.deepEqual(order.slice(0, 6), ['F0@20', 'F1@30', 'F2@40', 'F3@50', 'B0@60', 'F4@80']);
    assert.deepEqual(summarize(r).peak_inflight, [8, 7, 4, 1]);
  });

  it('says why a stuck stage that waits for no input is stuck', () => {
    const status = idleStatus({ stage: 1, remaining: 3, forwardReady: ['F2'] });
    assert.match(
      describeDeadlock([status], 5),
      /stage 1, iteration 0: .*; waiting for no input: its policy picks none of its ready tasks/,
    );
    assert.match(
      describeDeadlock([{ ...status, forwardReady: [] }], 5),
      /waiting for no input it knows of \(no start for this iteration\?\)/,
    );
    assert.doesNotMatch(describeDeadlock([status], 5), /waiting for ;|waiting for $/m);
  });

  it('names a stage whose start never came as stuck, with the arrivals it holds for that iteration', async () => {
    // The start of iteration 1 to stage 2 is lost: stages 1 and 3 wait on it, stage 2 holds their messages.
    for (const [lost, iteration, before] of [
      [1, 1, 'iteration 0 finished'],
      [0, 0, 'none started yet'],
    ] as const) {
      const inner = new LocalBus();
      let starts = 0;
      const bus: Bus = {
        kind: inner.kind,
        maxMessageBytes: inner.maxMessageBytes,
        publish: (subj, data) =>
          subj === subject('baton', 'control', 2) && starts++ === lost ? undefined : inner.publish(subj, data),
        subscribe: (subj, h) => inner.subscribe(subj, h),
        flush: () => inner.flush(),
        written: () => inner.written(),
        close: () => inner.close(),
      };
      try {
        await assert.rejects(
          runJob(resolveConfig({ stages: 4, microbatches: 4, iterations: 2 }), { clock: 'virtual', bus }),
          (e: unknown) => {
            assert.ok(e instanceof DeadlockError, String(e));
            assert.match(e.message, /: 4 stage\(s\) idle with work left\n/);
            assert.match(
              e.message,
              new RegExp(
                `\\n  stage 2: waiting for the start of iteration ${iteration}, ${before}; 4 input\\(s\\) and gradient\\(s\\) for it held\\n  stage 3, iteration ${iteration}: idle`,
              ),
            );
            return true;
          },
        );
      } finally {
        await inner.close();
      }
    }
  });

  /** Runs `use` with the path of a user policy module named `name` whose choose is `choose` (JS source). */
  async function withPolicyModule(name: string, choose: string, use: (file: string) => Promise<void>): Promise<void> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-policy-'));
    const file = path.join(dir, `${name}.js`);
    fs.writeFileSync(
      file,
      `
      module.exports.policy = {
        name: '${name}', binding: false, splitBackward: false,
        check() {}, start() { return null; },
        ${choose},
        advance(memo) { return memo; },
      };`,
    );
    try {
      await use(file);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }

  it('ends a deadlock with an error naming the stuck stage, its buffers and what it waits for', async () => {
    // A user policy that refuses backward tasks at stage 1: the pipeline cannot finish.
    await withPolicyModule(
      'stubborn',
      'choose(ready, memo, ctx) { return ctx.stage === 1 ? (ready.F[0] || null) : (ready.B[0] || ready.F[0] || null); }',
      (file) =>
        assert.rejects(sim({ stages: 3, microbatches: 4, policy: file }), (e: unknown) => {
          assert.ok(e instanceof DeadlockError, String(e));
          assert.match(e.message, /stage 1, iteration 0: idle with 4 tasks left/);
          assert.match(e.message, /backward-ready=\[B0 B1 B2 B3\]/);
          assert.ok(e.timeline.length > 0);
          return true;
        }),
    );
  });

  it('fails, naming the policy, when it picks a task that is not ready (not a deadlock)', async () => {
    await withPolicyModule(
      'wild',
      "choose(ready) { return ready.F.length > 0 ? { kind: 'B', mb: 1, chunk: 0 } : null; }",
      (file) =>
        assert.rejects(
          sim({ stages: 2, microbatches: 2, policy: file }),
          (e: Error) =>
            e.name === 'JobError' &&
            /actor stage-0 failed: stage 0: policy wild picked B1, which is not ready \(ready: F0/.test(e.message),
        ),
    );
  });

  it('fails, naming the policy, when it returns something that is not a task of the pipeline', async () => {
    await withPolicyModule('wild', "choose() { return { kind: 'F', mb: 999, chunk: 0 }; }", (file) =>
      assert.rejects(
        sim({ stages: 2, microbatches: 2, policy: file }),
        (e: Error) =>
          e.name === 'JobError' &&
          /actor stage-(\d) failed: stage \1: policy wild returned \{"kind":"F","mb":999,"chunk":0\}, which is not a task of this pipeline \(mb must be an integer from 0 to 1\)/.test(
            e.message,
          ),
      ),
    );
  });

  it('finds dependency violations in a doctored trace', async () => {
    const r = await sim({ stages: 3, microbatches: 4, policy: 'bf' });
    assert.deepEqual(validateRun(r.events, r.shape, 1), []);
    const moved = r.events.map((e) =>
      e.type === 'task-start' && e.stage === 2 && e.kind === 'F' && e.mb === 1 ? { ...e, t: 0 } : e,
    );
    const problems = validateRun(moved, r.shape, 1);
    assert.ok(
      problems.some((p) => /stage 2, iteration 0, F1: started at 0 before its activation arrived/.test(p)),
      problems.join('\n'),
    );
    const dropped = r.events.filter((e) => !(e.type === 'task-end' && e.stage === 0 && e.kind === 'B' && e.mb === 3));
    assert.ok(validateRun(dropped, r.shape, 1).some((p) => /stage 0, iteration 0, B3: never ended/.test(p)));
  });

  it('finds a first-stage forward that started before its data arrived, or without it', async () => {
    const r = await sim({ stages: 3, microbatches: 4, policy: 'bf' });
    const isData1 = (e: BatonEvent) => e.type === 'receive' && e.kind === 'data' && e.mb === 1;
    const late = r.events.map((e) => (isData1(e) ? { ...e, t: 1000 } : e));
    assert.ok(
      validateRun(late, r.shape, 1).some((p) =>
        /^stage 0, iteration 0, F1: started at \d+ before its data arrived \(1000\)$/.test(p),
      ),
      validateRun(late, r.shape, 1).join('\n'),
    );
    const missing = r.events.filter((e) => !isData1(e));
    assert.deepEqual(validateRun(missing, r.shape, 1), [
      'stage 0, iteration 0, F1: started without receiving its data',
    ]);
  });

  it('finds a stage that began an iteration before it had ended the one before', async () => {
    const r = await sim({ stages: 2, microbatches: 2, policy: 'bf', iterations: 2 });
    assert.deepEqual(validateRun(r.events, r.shape, 2), []);
    // Iteration 1 moved 50 ms earlier as a whole: each iteration is consistent in itself.
    const early = r.events.map((e) => (e.iteration === 1 ? { ...e, t: e.t - 50 } : e));
    const problems = validateRun(early, r.shape, 2);
    assert.equal(problems.length, 2, problems.join('\n'));
    assert.match(
      problems[0],
      /^stage 0, iteration 1: F0 started at \d+, before iteration 0 ended at this stage \(\d+\)$/,
    );
    assert.match(
      problems[1],
      /^stage 1, iteration 1: F0 started at \d+, before iteration 0 ended at this stage \(\d+\)$/,
    );
  });
});
