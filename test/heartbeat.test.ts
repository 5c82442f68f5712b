import { strict as assert } from 'assert';
import { LocalBus } from '../transport/local-bus';
import { NatsBus } from '../transport/nats-bus';
import { AuthBus } from '../transport/auth-bus';
import { encodeValue } from '../transport/codec';
import { BEAT_PREFIX, HeartbeatMonitor } from '../job/heartbeat';
import { resolveConfig } from '../job/config';
import { runOnce } from '../cli/run-once';
import { train } from '../cli/train';
import { HEARTBEAT_DEFAULTS, TRAIN_DEFAULTS } from '../job/defaults';
import { enterTask, leaveTask, readActivity, activityBuffer, tickLoop, tasksDone } from '../base/task-activity';
import { natsServerForSuite } from './nats-server-fixture';
import { testKeyFile } from './helpers-auth';
import { agentsReady, endAgents, nodeAgent } from './helpers-agents';

const KEY = testKeyFile();

const beat = (bus: LocalBus, node: string, a: { loopLagMs: number; inTaskMs: number; tasksDone: number }) =>
  bus.publish(`${BEAT_PREFIX}.${node}`, encodeValue({ verb: 'beat', name: node, pid: 1, seq: 0, ...a }));

describe('heartbeats', function () {
  this.timeout(120_000);

  it('marks tasks in shared memory a worker can read: in a task, for how long, how many done', async () => {
    const stop = tickLoop(10);
    try {
      const before = tasksDone();
      enterTask();
      const until = Date.now() + 60;
      while (Date.now() < until); // holds the loop, as a compute task does
      const a = readActivity(activityBuffer());
      assert.ok(a.inTaskMs >= 50 && a.loopLagMs >= 50, JSON.stringify(a));
      leaveTask();
      assert.equal(tasksDone(), before + 1);
      await new Promise((r) => setTimeout(r, 30));
      const b = readActivity(activityBuffer());
      assert.equal(b.inTaskMs, 0);
      assert.ok(b.loopLagMs < 50);
    } finally {
      stop();
    }
  });

  it('fails a node that stops beating, and not one busy inside a long task nor one whose beats say its loop is still', async () => {
    const bus = new LocalBus();
    const fails: string[] = [];
    const m = new HeartbeatMonitor(bus, ['a', 'b', 'c']);
    m.watch(300, (why) => fails.push(why));
    const t0 = Date.now();
    const timer = setInterval(() => {
      beat(bus, 'b', { loopLagMs: 5000, inTaskMs: 5000, tasksDone: 3 }); // busy in a task: alive
      if (Date.now() - t0 < 150) beat(bus, 'a', { loopLagMs: 0, inTaskMs: 0, tasksDone: 1 });
    }, 50);
    try {
      await new Promise((r) => setTimeout(r, 700));
      assert.equal(fails.length, 1, fails.join('; '));
      assert.match(fails[0], /node a \(pid 1\) sent no heartbeat for \d+ ms: dead or stopped/);
      assert.ok(m.progress() > 3, 'busy beats count as progress');
      // Tasks done, or a task entered while the loop turns (a handler awaiting), are not progress.
      const idle = new HeartbeatMonitor(bus, ['d']);
      for (let k = 1; k <= 5; k++) beat(bus, 'd', { loopLagMs: 4, inTaskMs: 5000, tasksDone: 100 * k });
      beat(bus, 'd', { loopLagMs: 300, inTaskMs: 10, tasksDone: 600 });
      assert.equal(idle.progress(), 0);
      beat(bus, 'd', { loopLagMs: 300, inTaskMs: 300, tasksDone: 600 });
      assert.equal(idle.progress(), 1);
      idle.close();
      // A beat saying the loop has been still for long outside a task fails nothing: beats are not authenticated.
      const still = new HeartbeatMonitor(bus, ['c']);
      const stillFails: string[] = [];
      still.watch(300, (why) => stillFails.push(why));
      beat(bus, 'c', { loopLagMs: 60_000, inTaskMs: 0, tasksDone: 0 });
      await new Promise((r) => setTimeout(r, 100));
      assert.deepEqual(stillFails, []);
      still.close();
      // Beats of nodes the job does not use are not even heard; malformed ones are counted and ignored.
      bus.publish(`${BEAT_PREFIX}.stranger`, encodeValue({ verb: 'beat' }));
      bus.publish(`${BEAT_PREFIX}.b`, new Uint8Array([1, 2, 3]));
      assert.ok(m.rejected >= 1);
    } finally {
      clearInterval(timer);
      m.close();
    }
  });

  describe('over a real nats-server, one process per stage', () => {
    const server = natsServerForSuite();

    for (const fault of ['SIGSTOP', 'SIGKILL'] as const)
      it(`detects a stage process stopped by ${fault} by its missing heartbeats (timeout 1.8 s)`, async () => {
        const names = [`hb${fault}1`, `hb${fault}2`];
        const agents = names.map((name) => nodeAgent(server().url, KEY.file, name));
        try {
          await agentsReady(agents);
          const cfg = resolveConfig({ job: `hb${fault}`, stages: 2, microbatches: 8, iterations: 100000 });
          assert.equal(HEARTBEAT_DEFAULTS.timeoutMs, 1800);
          let faultAt = 0;
          // After a SIGKILL, beats for the dead node keep coming: unsealed from a stranger, and sealed
          // by the other node of the job. Neither is the dead node's own, so neither delays the verdict.
          const stranger = await NatsBus.connect(server().url);
          const other = new AuthBus(await NatsBus.connect(server().url), KEY.key, `node:${names[0]}`);
          const forge = () => {
            const body = encodeValue({
              verb: 'beat',
              name: names[1],
              pid: 1,
              seq: 0,
              loopLagMs: 0,
              inTaskMs: 1,
              tasksDone: 9,
            });
            stranger.publish(`${BEAT_PREFIX}.${names[1]}`, body);
            other.publish(`${BEAT_PREFIX}.${names[1]}`, body);
          };
          let forger: NodeJS.Timeout | undefined;
          const run = runOnce(cfg, {
            transport: 'nats',
            processes: 'per-stage',
            natsUrl: server().url,
            nodes: names,
            nodeKey: KEY.key,
            onIteration: (r) => {
              if (faultAt === 0 && r.iteration >= 2) {
                faultAt = Date.now();
                process.kill(agents[1].pid!, fault);
                if (fault === 'SIGKILL') forger = setInterval(forge, 50);
              }
            },
          });
          const err = await run.then(
            () => null,
            (e: Error) => e,
          );
          clearInterval(forger);
          await stranger.close();
          await other.close();
          const after = Date.now() - faultAt;
          assert.ok(err, 'the job failed');
          assert.match(
            err.message,
            new RegExp(`node ${names[1]} \\(pid ${agents[1].pid}\\) sent no heartbeat for \\d+ ms`),
          );
          console.log(`      (${fault}: the job failed ${after} ms after the signal)`);
          assert.ok(
            after < 3500,
            `detected ${after} ms after the ${fault} (target 2000 ms; slack for a loaded machine)`,
          );
        } finally {
          endAgents(agents, 'SIGKILL');
        }
      });

    it('does not take a stage inside a task longer than the heartbeat timeout (1.8 s) for a dead or hung one', async () => {
      const t = {
        ...TRAIN_DEFAULTS,
        width: 256,
        heads: 4,
        layers: 12,
        seq: 64,
        microbatchSize: 48,
        totalIterations: 1,
      };
      const timeout = HEARTBEAT_DEFAULTS.timeoutMs;
      const cfg = resolveConfig({
        job: 'hblong',
        stages: 2,
        // One microbatch of 48 sequences through 12 blocks (6 a stage: a report of ~57 MB, under the codec's 64 MiB): with the
        // fused native kernels 8 blocks gave a mean task of 1.78 s, under the 1.8 s timeout; one in flight fits the wasm heap.
        microbatches: 1,
        profile: 'train',
        iterations: 1,
        stallTimeoutMs: 600_000,
        train: { ...t, valBatches: 1 },
      });
      const r = await train(cfg, { transport: 'nats', processes: 'per-stage', natsUrl: server().url, threads: 1 });
      const it = r.summary.iterations[0];
      console.log(
        `      (bound ${it.lower_bound_ms.toFixed(0)} ms, term ${it.lower_bound_term}, makespan ${it.makespan_ms.toFixed(0)} ms)`,
      );
      // The bound is a sum of task times: one stage's 2M tasks, or the critical path's 2P (F and B through every
      // stage, M = 1), so some task took at least their mean.
      const term = it.lower_bound_term ?? '';
      assert.match(term, /^(stage|critical-path)/);
      const tasks = term === 'critical-path' ? 2 * cfg.stages : 2 * cfg.microbatches;
      const meanTask = it.lower_bound_ms / tasks;
      console.log(`      (mean task ${meanTask.toFixed(0)} ms, heartbeat timeout ${timeout} ms)`);
      assert.ok(meanTask > timeout, `mean task ${meanTask.toFixed(0)} ms is under the ${timeout} ms timeout`);
      assert.equal(r.iterations_run, 1);
    });
  });
});
