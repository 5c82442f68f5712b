import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { criticalPathSplit } from '../bench/run-overhead';
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
