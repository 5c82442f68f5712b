import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { criticalPathSplit, formatRunOverhead } from '../bench/run-overhead';
import { runBarePipeline } from '../bench/bare-pipeline';
import { resolveConfig } from '../job/config';
import { runJob } from '../job/run-local';
import { builtinProfilePath } from '../models/profile';

describe("the overhead benchmark's critical-path split", () => {
  const P = 4;
  const M = 8;
  const run = (profile: string) =>
    runJob(
      resolveConfig({
        job: 'cpsplit',
        stages: P,
        microbatches: M,
        iterations: 2,
        policy: 'bf',
        profile,
        jitter: 'none',
      }),
      { clock: 'virtual' },
    );

  it('finds no overhead in an ideal run (virtual clock, free communication)', async () => {
    const r = await run('uniform');
    assert.deepEqual(
      r.records.map((x) => x.makespan),
      [330, 330],
    );
    assert.deepEqual(criticalPathSplit(r, P, M, 10, 20), { start: 0, fill: 0, last_stage: 0, drain: 0, report: 0 });
  });

  it('puts a message latency on each hop of the fill and the drain, and the parts add up to the overhead', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-overhead-'));
    try {
      const profile = JSON.parse(fs.readFileSync(builtinProfilePath('uniform'), 'utf8')) as {
        communication: { latencyMs: number };
      };
      profile.communication.latencyMs = 1.5;
      const file = path.join(dir, 'uniform-latency.json');
      fs.writeFileSync(file, JSON.stringify(profile));
      const r = await run(file);
      const parts = criticalPathSplit(r, P, M, 10, 20);
      assert.deepEqual(parts, { start: 0, fill: (P - 1) * 1.5, last_stage: 0, drain: (P - 1) * 1.5, report: 0 });
      const overhead = r.records[0].makespan - (M + P - 1) * 30;
      assert.equal(parts.start + parts.fill + parts.last_stage + parts.drain + parts.report, overhead);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the overhead benchmark's no-Baton floor", function () {
  this.timeout(60000);

  it('runs every task of every iteration once, one at a time per stage, each after what it depends on', async () => {
    const P = 3;
    const M = 4;
    const iterations = 2;
    const warmup = 1;
    const r = await runBarePipeline({ P, M, F: 5, B: 10, iterations, warmup });
    assert.equal(r.makespans_ms.length, iterations);
    for (const m of r.makespans_ms)
      assert.ok(m >= (M + P - 1) * 15, `makespan ${m} ms is below the ideal ${(M + P - 1) * 15} ms`);
    const find = (stage: number, it: number, kind: 'F' | 'B', mb: number) => {
      const found = r.tasks.filter((t) => t.stage === stage && t.iteration === it && t.kind === kind && t.mb === mb);
      assert.equal(found.length, 1, `stage ${stage} iteration ${it} ran ${kind}${mb} ${found.length} times`);
      return found[0];
    };
    assert.equal(r.tasks.length, P * 2 * M * (iterations + warmup));
    for (let it = 0; it < iterations + warmup; it++) {
      for (let s = 0; s < P; s++) {
        const mine = r.tasks.filter((t) => t.stage === s && t.iteration === it).sort((a, b) => a.start - b.start);
        for (let k = 1; k < mine.length; k++)
          assert.ok(mine[k].start >= mine[k - 1].end, `stage ${s} overlapped two tasks`);
        for (let mb = 0; mb < M; mb++) {
          const f = find(s, it, 'F', mb);
          const b = find(s, it, 'B', mb);
          assert.ok(f.end - f.start >= 5 && b.end - b.start >= 10, 'a task ended before its duration');
          if (s > 0)
            assert.ok(
              f.start >= find(s - 1, it, 'F', mb).end,
              `F${mb} at stage ${s} started before stage ${s - 1} finished it`,
            );
          if (s < P - 1)
            assert.ok(
              b.start >= find(s + 1, it, 'B', mb).end,
              `B${mb} at stage ${s} started before stage ${s + 1} finished it`,
            );
          else assert.ok(b.start >= f.end, `B${mb} at the last stage started before its F`);
        }
      }
    }
  });

  it('refuses a shape it cannot run', async () => {
    await assert.rejects(
      runBarePipeline({ P: 0, M: 4, F: 5, B: 10, iterations: 1, warmup: 0 }),
      /P must be a positive integer/,
    );
    await assert.rejects(
      runBarePipeline({ P: 2, M: 4, F: Number.NaN, B: 10, iterations: 1, warmup: 0 }),
      /F must be a finite number/,
    );
  });
});

describe("the overhead benchmark's table", () => {
  it('names the task durations the ideal was computed from, not fixed ones', () => {
    const parts = { start: 0, fill: 0, last_stage: 0, drain: 0, report: 0 };
    const x = {
      makespans_ms: [100],
      median_ms: 100,
      median_overhead: 0.1,
      parts_ms: parts,
      floor: { makespans_ms: [95], median_ms: 95, median_overhead: 0.05 },
      over_floor_ms: { median: 5, min: 5, max: 5 },
    };
    const text = formatRunOverhead({
      microbatches: 2,
      rounds: 1,
      realtime_measured: false,
      forward_ms: 5,
      backward_ms: 10,
      stages: [{ stages: 2, ideal_ms: 45, normal: x, realtime: null }],
    });
    assert.match(text, /uniform F=5 B=10, no jitter, bf, M=2/);
  });
});
