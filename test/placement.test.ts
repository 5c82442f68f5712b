import { strict as assert } from 'assert';
import { placeStages } from '../job/placement';
import { makeDurationModel, partitionProfile } from '../models/durations';
import { loadProfile } from '../models/profile';
import { stageModules } from '../compute/training-boundary';
import { TRAIN_DEFAULTS } from '../job/defaults';
import { main } from '../cli/main';
import { benchHetero } from '../bench/hetero-sim';
import { placedConfig } from '../cli/placement-flags';
import { predictedRates } from '../bench/hetero-real';
import { resolveConfig } from '../job/config';

async function baton(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const write = process.stderr.write.bind(process.stderr);
  process.stderr.write = ((s: string) => ((err += s), true)) as typeof process.stderr.write;
  try {
    return { code: await main(argv, (s) => (out += `${s}\n`)), out, err };
  } finally {
    process.stderr.write = write;
  }
}

const nodes = (n: number) => Array.from({ length: n }, (_, k) => `node${k}`);

describe('placement and the speed-aware partition', function () {
  this.timeout(120_000);

  it('auto keeps stage s on node s for stages of equal work, and puts the heaviest stage on the fastest node', () => {
    const speeds = [1, 1, 1, 0.5, 1, 0.33, 1, 1];
    const equal = placeStages({ stages: 8, nodes: nodes(8), speeds, placement: 'auto', work: new Array(8).fill(1) });
    assert.deepEqual(equal.nodes, nodes(8));
    assert.deepEqual(equal.speeds, speeds);
    const uneven = placeStages({
      stages: 3,
      nodes: nodes(4),
      speeds: [0.5, 2, 1, 0.1],
      placement: 'auto',
      work: [1, 3, 2],
    });
    assert.deepEqual(uneven.nodes, ['node0', 'node1', 'node2']);
    const heavyFirst = placeStages({
      stages: 3,
      nodes: nodes(3),
      speeds: [0.5, 2, 1],
      placement: 'auto',
      work: [3, 1, 2],
    });
    assert.deepEqual(heavyFirst.nodes, ['node1', 'node0', 'node2']);
  });

  it('refuses a placement that cannot be met, naming what is missing', () => {
    const base = { stages: 3, nodes: nodes(3), speeds: [1, 1, 1], work: [1, 1, 1] };
    for (const [placement, why] of [
      [
        { 0: 'node0', 1: 'node7', 2: 'node2' },
        /placement\.1: node "node7" is not one of the nodes \(node0, node1, node2\)/,
      ],
      [{ 0: 'node0', 2: 'node2' }, /placement: stage 1 has no node/],
      [{ 0: 'node0', 1: 'node0', 2: 'node2' }, /node node0 is given stages 0 and 1/],
      [{ 0: 'node0', 1: 'node1', 2: 'node2', 5: 'node2' }, /placement\.5: no such stage; the stages are 0\.\.2/],
    ] as const)
      assert.throws(() => placeStages({ ...base, placement }), why);
    assert.throws(
      () => placeStages({ ...base, nodes: nodes(2), speeds: [1, 1], placement: 'auto' }),
      /placement auto: 3 stages need 3 nodes, one each; 2 given/,
    );
  });

  it("cuts an emulated profile's layers in proportion to the stage weights, and a slow node's tasks take 1/speed as long", () => {
    const uniform = loadProfile('uniform');
    assert.deepEqual(partitionProfile(uniform, 4, 1).forwardMs, [10, 10, 10, 10]);
    const weighted = partitionProfile(uniform, 4, 1, [1, 1, 0.5, 0.5]).forwardMs;
    weighted.forEach((ms, s) => assert.ok(Math.abs(ms - [40 / 3, 40 / 3, 20 / 3, 20 / 3][s]) < 1e-9, `${s}: ${ms}`));
    const shape = { stages: 4, chunks: 1, microbatches: 4, splitBackward: false };
    const m = makeDurationModel({ profile: uniform, shape, jitter: 'none', seed: 0, stageSpeeds: [1, 1, 0.5, 0.25] });
    assert.deepEqual(
      [0, 1, 2, 3].map((s) => m.base(s, 'F', 0)),
      [10, 10, 20, 40],
    );
    assert.throws(
      () => makeDurationModel({ profile: uniform, shape, jitter: 'none', seed: 0, stageSpeeds: [1, 0] }),
      /stage speeds must be 4 positive numbers/,
    );
  });

  it('gives a faster stage more of a real model', () => {
    const train = { ...TRAIN_DEFAULTS, model: 'mlp' as const, layers: 8, width: 16, seq: 8 };
    const shape = { stages: 2, chunks: 1, microbatches: 1, splitBackward: false };
    const names = (w?: number[]) =>
      [0, 1].map((s) => {
        const [m] = stageModules(s, shape, train, false, w);
        m.dispose();
        return m.name;
      });
    assert.deepEqual(names(), ['mlp[embed, b0..b3]', 'mlp[b4..b7, head]']);
    // Stage 1 at a quarter of the speed: 4/5 of the work on stage 0 (the head is stage 1's too).
    assert.deepEqual(names([1, 0.25]), ['mlp[embed, b0..b6]', 'mlp[b7, head]']);
  });

  it('sim: a speed-aware partition beats the uniform one on uneven nodes, and nodes of speed 1 change nothing', async () => {
    const shape = ['--stages', '8', '--microbatches', '32'];
    const speeds = ['--node-speeds', '1,1,1,0.5,1,0.33,1,1'];
    const ms = async (...more: string[]) => {
      const r = await baton('sim', ...shape, ...more, '--json');
      assert.equal(r.code, 0, r.err);
      return JSON.parse(r.out);
    };
    const plain = await ms();
    const ones = await ms('--node-speeds', '1,1,1,1,1,1,1,1');
    const aware = await ms(...speeds);
    const uniform = await ms(...speeds, '--partition', 'uniform');
    assert.equal(ones.makespan_ms, plain.makespan_ms);
    // Balanced: every stage's work over its speed is 8/6.83 of a stage at speed 1.
    assert.ok(Math.abs(aware.makespan_ms - (plain.makespan_ms * 8) / 6.83) < 1e-6, String(aware.makespan_ms));
    assert.ok(uniform.makespan_ms > 2 * aware.makespan_ms, `${uniform.makespan_ms} vs ${aware.makespan_ms}`);
    assert.deepEqual(
      [aware.placement, aware.stage_speeds, uniform.partition],
      [
        ['node0', 'node1', 'node2', 'node3', 'node4', 'node5', 'node6', 'node7'],
        [1, 1, 1, 0.5, 1, 0.33, 1, 1],
        'uniform',
      ],
    );
  });

  it('places stages on the --nodes agents by their --node-speeds, one each, and refuses speeds that do not match them', () => {
    const cfg = resolveConfig({ job: 'p', stages: 2, microbatches: 2, policy: 'bf', profile: 'uniform' });
    const flags = (more: Record<string, unknown>) => ({ placement: 'auto', partition: 'speed', ...more });
    // The heavier stage 1 goes to the faster agent, whichever order --nodes names them in.
    const placed = placedConfig(flags({ nodes: ['slow', 'fast'], nodeSpeeds: ['0.4', '1.2'] }), cfg, () => [1, 2]);
    assert.deepEqual(
      [placed.placement, placed.stageSpeeds],
      [
        ['slow', 'fast'],
        [0.4, 1.2],
      ],
    );
    const swapped = placedConfig(flags({ nodes: ['fast', 'slow'], nodeSpeeds: ['1.2', '0.4'] }), cfg, () => [1, 2]);
    assert.deepEqual(
      [swapped.placement, swapped.stageSpeeds],
      [
        ['slow', 'fast'],
        [0.4, 1.2],
      ],
    );
    const given = placedConfig(flags({ nodes: ['a', 'b'], placement: '0=b,1=a' }), cfg, () => [1, 1]);
    assert.deepEqual(given.placement, ['b', 'a']);
    // Without speeds or a placement the agents get blocks of stages, as before.
    assert.equal(placedConfig(flags({ nodes: ['a'] }), cfg, () => [1, 1]).placement, null);
    assert.throws(
      () => placedConfig(flags({ nodes: ['a', 'b'], nodeSpeeds: ['1'] }), cfg, () => [1, 1]),
      /--node-speeds gives 1 speeds for the 2 agents of --nodes \(a,b\)/,
    );
    assert.throws(
      () => placedConfig(flags({ nodes: ['a'], nodeSpeeds: ['1'] }), cfg, () => [1, 1]),
      /2 stages need 2 agents, 1 given/,
    );
  });

  it("bench hetero-real's ideal: the slowest stage's FLOPs / speed, uniform against all FLOPs over the summed speeds", () => {
    // Stages of 1 and 1 on nodes of speed 1 and 0.25: uniform is set by 1/0.25 = 4, ideal 2/1.25 = 1.6.
    const p = predictedRates({ uniform: [1, 1], speed: [1.5, 0.5] }, [1, 0.25]);
    assert.ok(Math.abs(p.idealRatio - 4 / 1.6) < 1e-12, String(p.idealRatio));
    assert.ok(Math.abs(p.splitRatio - 4 / 2) < 1e-12, String(p.splitRatio));
  });

  it('refuses a job file whose placement names a node that is not there, with exit 2 and the key path', async () => {
    const fs = await import('fs');
    const os = await import('os');
    const path = await import('path');
    const f = path.join(os.tmpdir(), `baton-placement-${process.pid}.yaml`);
    fs.writeFileSync(f, 'shape: {stages: 2}\nnodes: {speeds: [1, 0.5]}\nplacement: {0: node1, 1: gpu-box}\n');
    try {
      const r = await baton('sim', '--config', f);
      assert.equal(r.code, 2);
      assert.match(r.err, /PlacementError: placement\.1: node "gpu-box" is not one of the nodes \(node0, node1\)/);
      const ok = await baton('sim', '--config', f, '--placement', '0=node1,1=node0', '--json');
      assert.deepEqual(JSON.parse(ok.out).placement, ['node1', 'node0']);
    } finally {
      fs.rmSync(f, { force: true });
    }
  });

  it('bench hetero: the speed-aware partition is never slower, 2x faster and exactly ideal on the uniform profile', async () => {
    const r = await benchHetero({ microbatches: 16 });
    for (const row of r.rows) {
      if (row.profile === 'uniform') assert.ok(row.speedup > 2, `${row.profile} ${row.policy}: ${row.speedup}`);
      assert.ok(row.speed_ms <= row.uniform_ms, `${row.profile} ${row.policy}`);
    }
    const plain = r.rows.find((x) => x.profile === 'uniform' && x.policy === 'bf')!;
    assert.ok(Math.abs(plain.speed_vs_ideal - 1) < 1e-9);
  });
});
