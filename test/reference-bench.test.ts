import { strict as assert } from 'assert';
import { spawnSync } from 'child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'fs';
import { tmpdir } from 'os';
import * as path from 'path';
import { benchOfflineReference } from '../bench/offline-reference';
import { measureAll } from '../bench/reference-pool';

const bench = (...argv: string[]) =>
  spawnSync(process.execPath, [path.join(__dirname, '..', 'bench', 'run.js'), 'reference', ...argv], {
    encoding: 'utf8',
  });

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
    const r = bench('--jobs', '0');
    assert.equal(r.status, 2);
    assert.match(r.stderr, /--jobs must be a positive integer, got 0/);
  });

  it('shows and draws a saved --json result with --from, and refuses a damaged one or a flag that would run', async function () {
    this.timeout(60_000);
    const dir = mkdtempSync(path.join(tmpdir(), 'baton-ref-'));
    const saved = await benchOfflineReference({
      stages: [3],
      profiles: ['llm', 'multimodal'],
      limits: [2],
      seeds: 2,
      microbatches: 6,
      progress: () => {},
    });
    const file = path.join(dir, 'ref.json'),
      svg = path.join(dir, 'ref.svg');
    writeFileSync(file, JSON.stringify(saved));
    const shown = bench('--from', file, '--svg', svg);
    assert.equal(shown.status, 0, shown.stderr);
    assert.match(shown.stdout, /^llm +3 +2 /m);
    assert.match(shown.stdout, /^multimodal +3 +2 /m);
    assert.ok(shown.stdout.includes(`picture: ${svg}`));
    const picture = readFileSync(svg, 'utf8');
    assert.equal(picture.match(/<circle /g)?.length, 2 * saved.runs.length, 'a dot per seed in each panel');
    assert.match(picture, /llm P=3 limit 2 seed 1: \d\.\d{3}/);
    assert.match(picture, /target 1\.10/);
    const json = bench('--from', file, '--json');
    assert.deepEqual(JSON.parse(json.stdout), JSON.parse(JSON.stringify(saved)));

    const damaged = path.join(dir, 'damaged.json');
    writeFileSync(damaged, JSON.stringify({ ...saved, runs: [{ ...saved.runs[0], seed: 'one' }] }));
    for (const [argv, re] of [
      [['--from', damaged], /--from .*damaged\.json: not a reference bench result at runs\.0\.seed: /],
      [['--from', path.join(dir, 'none.json')], /--from .*none\.json: no such file/],
      [['--from', svg], /--from .*ref\.svg: not JSON .*--json > FILE/],
      [
        ['--from', file, '--seeds', '2'],
        /--from shows a saved result and runs nothing: --seeds cannot be given with it/,
      ],
      [['--from', file, '--svg', dir], /--svg .*: is a directory/],
    ] as const) {
      const r = bench(...argv);
      assert.equal(r.status, 2, `${argv.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, re);
    }
  });
});
