import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { criticalPathSplit } from '../bench/run-overhead';
import { bareMakespans } from '../bench/bare-pipeline';
import { resolveConfig } from '../actors/config';
import { runJob } from '../actors/job';
import { builtinProfilePath } from '../models/profile';

describe('the overhead benchmark\'s critical-path split', () => {
  const P = 4;
  const M = 8;
  const run = (profile: string) => runJob(resolveConfig({ job: 'cpsplit', stages: P, microbatches: M, iterations: 2, policy: 'bf', profile, jitter: 'none' }), { clock: 'virtual' });

  it('finds no overhead in an ideal run (virtual clock, free communication)', async () => {
    const r = await run('uniform');
    assert.deepEqual(r.records.map((x) => x.makespan), [330, 330]);
    assert.deepEqual(criticalPathSplit(r, P, M, 10, 20), { start: 0, fill: 0, last_stage: 0, drain: 0, report: 0 });
  });

  it('puts a message latency on each hop of the fill and the drain, and the parts add up to the overhead', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-overhead-'));
    try {
      const profile = JSON.parse(fs.readFileSync(builtinProfilePath('uniform'), 'utf8')) as { communication: { latencyMs: number } };
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

describe('the overhead benchmark\'s no-Baton floor', function () {
  this.timeout(60000);

  it('runs every task of every iteration in dependency order: no makespan below (M+P-1)(F+B)', async () => {
    const P = 3;
    const M = 4;
    const makespans = await bareMakespans({ P, M, F: 5, B: 10, iterations: 2, warmup: 1 });
    assert.equal(makespans.length, 2);
    for (const m of makespans) assert.ok(m >= (M + P - 1) * 15, `makespan ${m} ms is below the ideal ${(M + P - 1) * 15} ms`);
  });

  it('refuses a shape it cannot run', async () => {
    await assert.rejects(bareMakespans({ P: 0, M: 4, F: 5, B: 10, iterations: 1, warmup: 0 }), /P must be a positive integer/);
    await assert.rejects(bareMakespans({ P: 2, M: 4, F: Number.NaN, B: 10, iterations: 1, warmup: 0 }), /F must be a finite number/);
  });
});
