import { strict as assert } from 'assert';
import { ChildProcess, spawn } from 'child_process';
import { mkdtempSync } from 'fs';
import * as os from 'os';
import * as path from 'path';
import { JobConfig, resolveConfig } from '../job/config';
import { runJob } from '../job/run-local';
import { train } from '../cli/train';
import { iterationLoss, recordParams } from '../cli/train-lanes';
import { loadBackend } from '../models/backend';
import { TrainConfig } from '../models/train-config';
import { IterationRecord } from '../actors/coordinator';
import { natsServerForSuite } from './nats-server-fixture';
import { testKeyFile } from './helpers-auth';
import { batonInProcess } from './helpers-cli';
import { tinyTrainConfig } from './helpers-train';

// `baton train --tp T --dp D`: real GPT compute split across ranks and replicas, wired as a
// job (the compute itself is test/tp-compute.test.ts's), on the local bus and over NATS with
// one OS process per stage of each rank and replica. Tiny models, 2 iterations.

const CLI = path.join(__dirname, '..', 'cli', 'main.js');
const ITERATIONS = 2;

const tiny = (extra: Partial<TrainConfig> = {}): TrainConfig => tinyTrainConfig('gpt', ITERATIONS, extra);

let jobs = 0;
function job(o: { tp: number; dp?: number; policy: string; jitterSeed?: number; M?: number }): JobConfig {
  return resolveConfig({
    job: `tptrain${jobs++}`,
    stages: 2,
    microbatches: o.M ?? 2,
    tp: o.tp,
    dp: o.dp ?? 1,
    policy: o.policy,
    profile: 'train',
    jitter: o.jitterSeed ? 'paper' : 'none',
    seed: o.jitterSeed ?? 0,
    iterations: ITERATIONS,
    train: tiny(),
    stallTimeoutMs: 120000,
  });
}

const RUNS: [string, number][] = [
  ['bf', 0],
  ['1f1b', 0],
  ['gpipe', 0],
  ['bf', 3],
  ['bf', 4],
];

const local = { transport: 'local' as const, processes: 'single' as const, threads: 1 };

describe('baton train --tp/--dp with real GPT compute', function () {
  this.timeout(600_000);
  const server = natsServerForSuite();
  const key = testKeyFile();
  const agents: ChildProcess[] = [];
  const names = Array.from({ length: 8 }, (_, i) => `tptrain-agent${i}`);
  const overNats = (nodes: number) => ({
    transport: 'nats' as const,
    processes: 'per-stage' as const,
    natsUrl: server().url,
    nodes: names.slice(0, nodes),
    nodeKey: key.key,
    threads: 1,
  });
  const checksums = new Map<string, string>();

  before(async () => {
    await loadBackend({ force: 'wasm' });
    // Node agents of our own, one per stage of each rank and replica, reused by the jobs below
    // (each job is hosted and finished in turn); the launcher's own spawning is tested once.
    for (const name of names)
      agents.push(
        spawn(
          process.execPath,
          [CLI, 'node', '--nats', server().url, '--key-file', key.file, '--name', name, '--quiet'],
          {
            stdio: 'ignore',
            env: { ...process.env, BATON_THREADS: '1' },
          },
        ),
      );
  });
  after(() => {
    for (const a of agents) a.kill('SIGTERM');
  });

  it('TP=2, P=2: the checksum is the same for bf, 1f1b, gpipe and two jitter seeds on the local bus', async () => {
    const sums = new Set<string>();
    for (const [policy, jitterSeed] of RUNS) {
      const r = await train(job({ tp: 2, policy, jitterSeed }), local);
      assert.equal(r.losses.length, ITERATIONS);
      assert.equal(r.summary.tp, 2);
      sums.add(r.param_checksum);
      // Each stage actor's all-reduce time, and each iteration's: their means are the summary's.
      const a = r.all_reduce!;
      assert.deepEqual(
        a.per_stage_actor.map((x) => [x.stage, x.rank, x.replica]),
        [
          [0, 0, 0],
          [1, 0, 0],
          [0, 1, 0],
          [1, 1, 0],
        ],
      );
      assert.ok(a.per_stage_actor.every((x) => x.tp_all_reduce_ms > 0 && x.dp_all_reduce_ms === 0));
      assert.deepEqual(
        a.per_iteration.map((x) => x.iteration),
        [...Array(ITERATIONS).keys()],
      );
      const mean = (xs: number[]) => xs.reduce((x, y) => x + y, 0) / xs.length;
      const close = (x: number, y: number) => Math.abs(x - y) <= 1e-9 * Math.max(1, Math.abs(y));
      assert.ok(close(mean(a.per_iteration.map((x) => x.tp_all_reduce_ms)), a.tp_all_reduce_ms));
      const coord = r.summary.breakdown!.tp_coordination_ms;
      assert.ok(close(mean(a.per_iteration.map((x) => x.tp_coordination_ms)), coord), `${coord}`);
      const peer = r.summary.breakdown!.tp_peer_wait_ms;
      assert.ok(close(mean(a.per_iteration.map((x) => x.tp_peer_wait_ms)), peer), `${peer}`);
    }
    assert.equal(sums.size, 1, [...sums].join(' '));
    checksums.set('tp2', [...sums][0]!);
  });

  it('TP=2, P=2 over NATS with one process per rank: the same checksum for every policy and seed', async () => {
    for (const [policy, jitterSeed] of RUNS) {
      const r = await train(job({ tp: 2, policy, jitterSeed }), overNats(4));
      assert.equal(r.summary.processes, 4, `${policy} seed ${jitterSeed}: ${r.summary.processes} processes`);
      assert.equal(r.param_checksum, checksums.get('tp2'), `${policy} seed ${jitterSeed}`);
      assert.ok(r.all_reduce && r.all_reduce.tp_all_reduce_ms > 0, 'the TP all-reduce time is measured');
    }
    // The launcher's own stage processes (--processes per-stage without --nodes): one per rank.
    const own = await train(job({ tp: 2, policy: 'bf', jitterSeed: 3 }), {
      ...overNats(0),
      nodes: undefined,
      nodeKey: undefined,
    });
    assert.equal(own.summary.processes, 4);
    assert.equal(new Set(own.summary.pids).size, 4);
    assert.equal(own.param_checksum, checksums.get('tp2'));
  });

  it('DP × TP × PP = 2 × 2 × 2 over NATS (8 processes): the same checksum for two policies, and as on the local bus', async () => {
    const base = await train(job({ tp: 2, dp: 2, policy: 'gpipe' }), local);
    for (const policy of ['bf', '1f1b']) {
      const r = await train(job({ tp: 2, dp: 2, policy, jitterSeed: 5 }), overNats(8));
      assert.equal(r.summary.processes, 8);
      assert.equal(r.param_checksum, base.param_checksum, policy);
    }
  });

  // Each replica sums its microbatches' gradients in float64 and the replicas add those partial
  // sums before the one rounding to float32 (compute/replica-reduce.ts), so the grouping of the
  // microbatches does not change the step: bitwise the parameters, through the whole job.
  for (const tp of [1, 2])
    it(`TP=${tp}: DP=2 ends with bitwise the parameters of DP=1 with 2·M microbatches, and the same loss`, async () => {
      const runOf = async (cfg: JobConfig) => {
        const records: IterationRecord[] = [];
        await runJob(cfg, { clock: 'real', onIteration: (r) => records.push(r) });
        return { params: recordParams(cfg, records[records.length - 1]!)!, loss: iterationLoss(cfg, records[0]!)! };
      };
      const two = await runOf(job({ tp, dp: 2, policy: 'bf', M: 3 }));
      const one = await runOf(job({ tp, dp: 1, policy: 'bf', M: 6 }));
      // The loss is a mean of the replicas' means against one mean of all: equal up to float64 rounding.
      assert.ok(Math.abs(two.loss - one.loss) <= 1e-12 * Math.abs(one.loss), `loss ${two.loss} vs ${one.loss}`);
      assert.deepEqual([...two.params.keys()].sort(), [...one.params.keys()].sort());
      for (const [name, want] of one.params) assert.deepEqual(two.params.get(name), want, name);
    });

  it('refuses shapes the model cannot split, and wide jobs it cannot run, with exit 2 and a message naming them', async () => {
    const model = ['--model', 'gpt', '--heads', '4', '--width', '16', '--layers', '2', '--seq', '8'];
    const cases: [string[], RegExp][] = [
      [
        [...model, '--tp', '3'],
        /gpt: --heads 4 is not divisible by --tp 3, .*the nearest valid --tp is 2 \(divisors of 4: 1, 2, 4\)/,
      ],
      [
        [...model, '--tp', '8'],
        /gpt: --tp 8 is larger than the 4 attention heads \(--heads 4\).*nearest valid --tp is 4/,
      ],
      [
        ['--model', 'mlp', '--width', '6', '--tp', '5'],
        /mlp: the blocks' hidden width 24 \(4 × --width 6\) is not divisible by --tp 5; the nearest valid --tp is 4/,
      ],
      [[...model, '--tp', '0'], /--tp/],
      [[...model, '--dp', '2', '--mode', 'async'], /--dp 2 with --mode async/],
      [
        [...model, '--tp', '2', '--checkpoint', path.join(mkdtempSync(path.join(os.tmpdir(), 'tptrain-')), 'ck')],
        /--tp 2 --dp 1 with --checkpoint or --resume: checkpoints hold whole stages of one replica/,
      ],
    ];
    for (const [argv, re] of cases) {
      const r = await batonInProcess('train', ...argv);
      assert.equal(r.code, 2, `${argv.join(' ')}: exit ${r.code}, stderr ${r.err}`);
      assert.match(r.err, re, argv.join(' '));
    }
  });
});
