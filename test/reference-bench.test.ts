import { strict as assert } from 'assert';
import { spawnSync } from 'child_process';
import * as path from 'path';
import { benchOfflineReference } from '../bench/offline-reference';
import { measureAll } from '../bench/reference-pool';

describe('the reference benchmark on several threads (bench --jobs)', () => {
  it('gives the same tables and per-run rows, in the same order, on 1 and 2 threads', async function () {
    this.timeout(120_000);
    const o = { stages: [4], profiles: ['llm'], limits: [4], seeds: 3, microbatches: 8, progress: () => {} };
    const one = await benchOfflineReference({ ...o, jobs: 1 });
    const two = await benchOfflineReference({ ...o, jobs: 2 });
    assert.equal(two.jobs, 2);
    assert.deepEqual(two.summary, one.summary);
    assert.deepEqual(two.runs, one.runs);
    assert.deepEqual(
      two.runs.map((r) => r.seed),
      [0, 1, 2],
    );
    assert.ok(two.runs.every((r) => (r.offline as number) >= (r.bound as number) - 1e-9));
  });

  it("rejects with the failing instance's number and error, and stops its threads", async function () {
    this.timeout(60_000);
    const good = { base: { stages: 2, microbatches: 2, profile: 'llm', seed: 0 } };
    const bad = { base: { stages: 2, microbatches: 2, profile: 'no-such-profile', seed: 0 } };
    const done: number[] = [];
    await assert.rejects(
      measureAll([good, bad, good], 2, (i) => done.push(i)),
      /instance 2: .*no-such-profile/,
    );
    assert.ok(!done.includes(1));
  });

  it('refuses --jobs that is not a positive integer before running anything', () => {
    const r = spawnSync(process.execPath, [path.join(__dirname, '..', 'bench', 'run.js'), 'reference', '--jobs', '0'], {
      encoding: 'utf8',
    });
    assert.equal(r.status, 2);
    assert.match(r.stderr, /--jobs must be a positive integer, got 0/);
  });
});
