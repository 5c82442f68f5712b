import { strict as assert } from 'assert';
import { spawnSync } from 'child_process';
import * as path from 'path';
import { resolveConfig, JobConfig } from '../job/config';
import { runJob, summarize } from '../job/run-local';
import { EmulatedCompute, StageCompute } from '../stage/compute';
import { Lane } from '../transport/lanes';
import { NatsBus } from '../transport/nats-bus';
import { NatsServerHandle, startNatsServer } from '../transport/nats-server';
import { spawnBusAllReduce } from '../actors/bus-all-reduce';
import { ActorRuntime } from '../actors/runtime';
import { VirtualClock } from '../base/clock';
import { LocalBus } from '../transport/local-bus';
import { testKeyFile } from './helpers-auth';

const MAIN = path.join(__dirname, '..', 'cli', 'main.js');
const baton = (...args: string[]) => spawnSync(process.execPath, [MAIN, ...args], { encoding: 'utf8', timeout: 60000 });

describe('wide jobs: refusals, a rank that stops answering, AllReduce over the bus, NATS', function () {
  this.timeout(120000);

  it('refuses shapes and modes a wide job cannot run, exit 2, naming the numbers', () => {
    const cases: [string[], RegExp][] = [
      [['sim', '--tp', '0'], /--tp must be a positive integer, got 0/],
      [['sim', '--tp', '65'], /--tp\) must be an integer from 1 to 64, got 65/],
      [['sim', '--dp', '2', '--mode', 'async'], /--dp 2 with --mode async: .*use --mode sync or --dp 1/],
      [
        [
          'run',
          '--tp',
          '2',
          '--stages',
          '2',
          '--nats',
          'nats://127.0.0.1:1',
          '--nodes',
          'n1,n2',
          '--node-key-file',
          testKeyFile().file,
        ],
        /a job of 2 stages × 2 ranks × 1 replicas takes one agent per stage actor, 4 \(in replica, rank, stage order\); --nodes names 2/,
      ],
      [['train', '--tp', '3', '--iterations', '1'], /gpt: --heads 4 is not divisible by --tp 3/],
    ];
    for (const [args, re] of cases) {
      const r = baton(...args);
      assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, re, args.join(' '));
    }
  });

  it('fails a job whose rank stops answering, naming the rank its group waits for', async () => {
    const computeFor = (stage: number, clock: VirtualClock, _c?: unknown, lane?: Lane): StageCompute =>
      stage === 1 && lane?.rank === 1
        ? { kind: 'silent', run: () => {} }
        : new EmulatedCompute(clock, stage, { compute: () => 1 });
    const cfg = resolveConfig({ stages: 3, microbatches: 4, tp: 2 });
    await assert.rejects(
      runJob(cfg, { clock: 'virtual', computeFor: computeFor as never }),
      (e: Error) =>
        e.name === 'DeadlockError' &&
        /stage 1 \(rank 1, replica 0\), iteration 0: still running F0, never answered/.test(e.message) &&
        /TP group's agreement on/.test(e.message),
    );
  });

  it('all-reduces over the bus in member order, whatever order the parts arrive in', async () => {
    const clock = new VirtualClock();
    const runtime = new ActorRuntime(clock, 'ar');
    const bus = new LocalBus();
    const sink = () => {};
    const members = [0, 1, 2].map((m) =>
      spawnBusAllReduce({
        runtime,
        bus,
        job: 'j',
        stage: 0,
        members: 3,
        member: m,
        subjectOf: (x) => `baton.j.tp-reduce.0.${x}.0`,
        name: `ar-${m}`,
        sink,
        costMs: () => 3 - m, // later members' parts arrive first
      }),
    );
    const parts = [Float32Array.of(1e8, 1), Float32Array.of(1, 2), Float32Array.of(-1e8, 3)];
    const sums = members.map((m, i) => m.allReduce('k', parts[i]));
    await clock.run(() => false);
    const got = await Promise.all(sums);
    // Member order: (1e8 + 1) + (-1e8) in float32 is 0, not 1: every member sums the same way.
    const want = new Float32Array(2);
    for (const p of parts) for (let i = 0; i < 2; i++) want[i] += p[i];
    for (const g of got) assert.deepEqual([...g], [...want]);
    runtime.shutdown();
  });

  it('a float64 group sums float64 parts unrounded and refuses, counted, a float32 part', async () => {
    const clock = new VirtualClock();
    const runtime = new ActorRuntime(clock, 'ar64');
    const bus = new LocalBus();
    const events: { type: string }[] = [];
    const members = [0, 1].map((m) =>
      spawnBusAllReduce<Float64Array>({
        runtime,
        bus,
        job: 'j',
        stage: 0,
        members: 2,
        member: m,
        subjectOf: (x) => `baton.j.dp-reduce.0.0.${x}`,
        name: `ar64-${m}`,
        sink: (e) => events.push(e),
        dtype: 'float64',
      }),
    );
    // 1 + 2^-40 is not a float32: a float64 sum keeps it.
    const sums = [Float64Array.of(1), Float64Array.of(2 ** -40)].map((p, i) => members[i]!.allReduce('k', p));
    await clock.run(() => false);
    for (const g of await Promise.all(sums)) assert.deepEqual([...g], [1 + 2 ** -40]);
    const stranger = spawnBusAllReduce({
      runtime,
      bus,
      job: 'j',
      stage: 0,
      members: 2,
      member: 1,
      subjectOf: (x) => `baton.j.dp-reduce.0.0.${x}`,
      name: 'ar32',
      sink: () => {},
    });
    void stranger.allReduce('k2', Float32Array.of(1)).catch(() => {});
    await clock.run(() => false);
    assert.ok(
      events.some((e) => e.type === 'reject' && /one float64 tensor/.test(JSON.stringify(e))),
      JSON.stringify(events),
    );
    runtime.shutdown();
  });

  describe('over a real nats-server (one process)', () => {
    let server: NatsServerHandle;
    before(async () => {
      server = await startNatsServer();
    });
    after(async () => {
      await server?.stop();
    });

    it('runs D × P × T = 2 × 2 × 2 stage actors to completion under two policies, validated', async () => {
      for (const policy of ['bf', '1f1b']) {
        const bus = await NatsBus.connect(server.url);
        try {
          const c: Partial<JobConfig> = { job: `tpdp${policy}`, stages: 2, microbatches: 4, tp: 2, dp: 2, policy };
          const r = await runJob(resolveConfig({ ...c, profile: 'llm', jitter: 'paper' }), { clock: 'real', bus });
          const s = summarize(r);
          assert.equal(r.lanes?.length, 8, policy);
          assert.equal(r.events.filter((e) => e.type === 'task-start').length, 8 * 2 * 4, policy);
          assert.equal(s.rejected, 0, policy);
        } finally {
          await bus.close();
        }
      }
    });
  });
});
