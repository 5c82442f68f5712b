import { strict as assert } from 'assert';
import { ChildProcess, spawn } from 'child_process';
import { readFileSync, readdirSync, statSync } from 'fs';
import * as path from 'path';
import { JobConfig, resolveConfig } from '../job/config';
import { runDistributed } from '../job/run-distributed';
import { summarize } from '../job/run-local';
import { runOnce } from '../cli/run';
import { tapCommand, tapLine } from '../cli/tap';
import { stageNodeFlags } from '../cli/stage-node-flags';
import { decodeEnvelope, decodeValue, encodeEnvelope, encodeValue } from '../transport/codec';
import { ENVELOPE_VERSION } from '../transport/envelope';
import { NatsBus } from '../transport/nats-bus';
import { startNatsServer } from '../transport/nats-server';
import { isAlive, natsServerForSuite } from './nats-server-fixture';
import { FUZZ_SEED, Rng, malformed } from './fuzz-gen';
import { newNodeAgent } from '../job/node-host';
import { bfUniform } from './helpers-job';
import { activationSend } from './helpers-events';
import { AuthBus } from '../transport/auth-bus';
import { testKeyFile } from './helpers-auth';
import { agentsReady, endAgents, nodeAgent } from './helpers-agents';

const CLI = path.join(__dirname, '..', 'cli', 'main.js');
/** The key file the agents this file starts by hand hold, and their launchers. */
const KEY = testKeyFile();

/** A job long enough to be cut short: 1000 iterations of bf over 2 stages and 8 microbatches. */
function longJob(job: string, extra: Partial<JobConfig> = {}): JobConfig {
  return bfUniform(job, 2, 8, { iterations: 1000, ...extra });
}

describe('end to end over a real nats-server, one OS process per stage', function () {
  this.timeout(180_000);
  const server = natsServerForSuite();

  for (const P of [4, 8])
    for (const [policy, chunks] of [
      ['bf', 1],
      ['1f1b', 1],
      ['interleaved-1f1b', 2],
    ] as const) {
      it(`runs ${policy} (V=${chunks}) with P=${P} stage processes and M=16, and the run validates`, async () => {
        const cfg = resolveConfig({
          job: `e2e-${P}-${policy}`,
          stages: P,
          microbatches: 16,
          chunks,
          policy,
          profile: 'uniform',
          jitter: 'paper',
          jitterScale: 0.2,
          seed: P,
        });
        const seen: number[] = [];
        const o = await runOnce(cfg, { transport: 'nats', processes: 'per-stage', natsUrl: server().url });
        const s = summarize(o.result);
        assert.equal(o.processes, P);
        assert.equal(new Set(o.pids).size, P);
        assert.ok(!o.pids.includes(process.pid), 'stages ran in other processes');
        for (const pid of o.pids) seen.push(pid);
        assert.equal(s.tasks, P * chunks * 16 * 2);
        assert.equal(s.rejected, 0);
        assert.ok(s.makespan_ms >= s.lower_bound_ms);
        // The spawned stage processes are gone once the run returns.
        await new Promise((r) => setTimeout(r, 200));
        assert.ok(
          seen.every((pid) => !isAlive(pid)),
          'stage processes were stopped',
        );
      });
    }

  it('lets a tap watch the flows of a job while it runs', async () => {
    const tap = await NatsBus.connect(server().url);
    const lines: ReturnType<typeof tapLine>[] = [];
    tap.subscribe('baton.tapped.>', (subj, data) => lines.push(tapLine(subj, data)));
    await tap.flush();
    try {
      await runOnce(resolveConfig({ job: 'tapped', stages: 2, microbatches: 4, policy: 'bf' }), {
        transport: 'nats',
        processes: 'per-stage',
        natsUrl: server().url,
      });
      const kinds = new Set(lines.map((l) => l.kind));
      for (const k of ['control', 'data', 'activation', 'gradient', 'report', 'trace'])
        assert.ok(kinds.has(k), `tap saw no ${k}: ${[...kinds].join(',')}`);
      const act = lines.find((l) => l.kind === 'activation')!;
      assert.match(act.task!, /^F\d+$/);
      assert.ok(act.latency_ms! >= 0 && act.latency_ms! < 5000, `latency ${act.latency_ms} ms`);
      assert.ok(lines.every((l) => !l.error));
    } finally {
      await tap.close();
    }
  });

  it('does not mix its stage processes up with an agent someone named like one', async () => {
    const bus = await NatsBus.connect(server().url);
    const agent = newNodeAgent({ name: 'coll-stage0', bus, log: () => {} });
    agent.start();
    try {
      const o = await runOnce(
        resolveConfig({ job: 'coll', stages: 2, microbatches: 4, policy: 'bf', profile: 'uniform' }),
        { transport: 'nats', processes: 'per-stage', natsUrl: server().url },
      );
      assert.equal(summarize(o.result).tasks, 2 * 4 * 2);
      assert.ok(!o.pids.includes(process.pid), 'the hand-started agent in this process hosted nothing');
    } finally {
      agent.leave('test over');
      await bus.close();
    }
  });

  it('says where its private nats-server is, so a tap can watch a run started without --nats', async () => {
    const child = spawn(
      process.execPath,
      [CLI, 'run', '--stages', '2', '--microbatches', '8', '--iterations', '20', '--job', 'private', '--json'],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let err = '';
        child.stderr!.on('data', (d: Buffer) => {
          err += d.toString();
          const m = /watch it with BATON_NATS_URL=\$\(cat (\S+)\) baton tap --job private/.exec(err);
          if (m) {
            // The tap's credentials are in a file only this user can read.
            assert.equal(statSync(m[1]).mode & 0o777, 0o600);
            resolve(readFileSync(m[1], 'utf8').trim());
          }
        });
        child.once('exit', () => reject(new Error(`run ended without naming its server: ${err}`)));
      });
      const lines: string[] = [];
      assert.equal(
        await tapCommand(['--nats', url, '--job', 'private', '--count', '5', '--json'], (l) => lines.push(l)),
        0,
      );
      assert.equal(lines.length, 5);
      assert.ok(
        lines.every((l) => (JSON.parse(l) as { subject: string }).subject.startsWith('baton.private.')),
        lines.join('\n'),
      );
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) =>
        child.exitCode !== null || child.signalCode !== null ? r(null) : child.once('exit', r),
      );
    }
  });

  it('tap --count N prints N lines even when more messages came in the same read', async () => {
    const lines: string[] = [];
    const tapped = tapCommand(['--nats', server().url, '--job', 'counted', '--count', '3', '--json'], (l) =>
      lines.push(l),
    );
    const pub = await NatsBus.connect(server().url);
    try {
      // Publish until the tap has subscribed and stopped; each burst is one socket write.
      let done = false;
      void tapped.finally(() => (done = true));
      for (let k = 0; !done && k < 200; k++) {
        for (let i = 0; i < 10; i++) pub.publish('baton.counted.trace.0', encodeValue({ events: [] }));
        await new Promise((r) => setTimeout(r, 20));
      }
      assert.equal(await tapped, 0);
      assert.equal(lines.length, 3, lines.join('\n'));
    } finally {
      await pub.close();
    }
  });

  it('keeps serving when a peer sends garbage to a stage mid-run', async () => {
    const vandal = await NatsBus.connect(server().url);
    const cfg = resolveConfig({ job: 'vandal', stages: 3, microbatches: 8, policy: 'bf', profile: 'uniform' });
    const junk = setInterval(() => {
      vandal.publish('baton.vandal.activation.1', new Uint8Array([0xff, 0x00, 0x13]));
      vandal.publish('baton.vandal.gradient.1', new TextEncoder().encode('{"not":"cbor"}'));
    }, 20);
    try {
      const o = await runOnce(cfg, { transport: 'nats', processes: 'per-stage', natsUrl: server().url });
      const s = summarize(o.result);
      assert.equal(s.tasks, 3 * 8 * 2);
      assert.ok(s.rejected > 0, 'the garbage was counted as rejected');
      assert.ok(o.result.events.some((e) => e.type === 'reject' && e.stage === 1));
    } finally {
      clearInterval(junk);
      await vandal.close();
    }
  });

  it('completes and validates when a peer replays real messages and sends stray reports, counting each as rejected', async () => {
    const vandal = await NatsBus.connect(server().url);
    const cfg = bfUniform('replay', 3, 8, { iterations: 2 });
    const replayed = new Set<string>();
    // Every activation and start stage 1 gets arrives again 30 ms later, seal and all; each report is followed by a truncated one.
    for (const subj of ['baton.replay.activation.1', 'baton.replay.control.1'])
      vandal.subscribe(subj, (_s, d, m) => {
        const k = Buffer.from(d).toString('base64');
        if (replayed.has(k)) return;
        replayed.add(k);
        const copy = Uint8Array.from(d);
        const seal = m?.seal && Uint8Array.from(m.seal);
        setTimeout(() => vandal.publish(subj, copy, seal), 30);
      });
    vandal.subscribe('baton.replay.report', (_s, d) => {
      if (d.length > 3) vandal.publish('baton.replay.report', d.subarray(0, 3));
    });
    await vandal.flush();
    try {
      const o = await runOnce(cfg, { transport: 'nats', processes: 'per-stage', natsUrl: server().url });
      const s = summarize(o.result);
      assert.equal(s.tasks, 2 * 3 * 8 * 2);
      assert.ok(replayed.size >= 2 * 8, `replayed ${replayed.size}`);
      // The first iteration's replays and stray reports at least (the last one's may come after the end).
      assert.ok(s.rejected >= 8 + 3, `rejected ${s.rejected}`);
      assert.ok(
        o.result.rejects.some((r) =>
          /^launcher: "baton\.replay\.report": refused a message without a seal \(unauthenticated\)/.test(r),
        ),
        o.result.rejects.join('\n'),
      );
      assert.ok(
        o.result.rejects.some((r) =>
          /^stage 1: "baton\.replay\.(activation|control)\.1": message \d+ of node:replay-stage[01]-[0-9a-f]+ again .*\(replay\)/.test(
            r,
          ),
        ),
        o.result.rejects.join('\n'),
      );
    } finally {
      await vandal.close();
    }
  });

  for (const processes of ['per-stage', 'single'] as const) {
    it(`refuses what a stage left by an earlier run of the same job name sends (another launch), and completes and validates (--processes ${processes})`, async () => {
      const orphan = await NatsBus.connect(server().url);
      const cfg = bfUniform(`relaunch-${processes}`, 3, 8);
      // As each iteration starts, a stage 0 of another launch sends stage 1 every microbatch's
      // activation at once, and a trace batch. Taken, they would run stage 1's forwards on
      // them, and the real activations would be refused as duplicates.
      orphan.subscribe(`baton.relaunch-${processes}.control.1`, (_s, d) => {
        const start = decodeEnvelope(d);
        for (let mb = 0; mb < 8; mb++) {
          orphan.publish(
            `baton.relaunch-${processes}.activation.1`,
            encodeEnvelope({
              v: ENVELOPE_VERSION,
              job: `relaunch-${processes}`,
              kind: 'activation',
              iteration: start.iteration,
              mb,
              chunk: 0,
              dir: 'forward',
              src: 0,
              dst: 1,
              seq: mb,
              sentAt: start.sentAt,
              bytes: 0,
              tensors: [],
              launch: 'earlier',
            }),
          );
        }
        orphan.publish(`baton.relaunch-${processes}.trace.0`, encodeValue({ events: [], launch: 'earlier' }));
      });
      await orphan.flush();
      try {
        const o = await runOnce(cfg, { transport: 'nats', processes, natsUrl: server().url });
        const s = summarize(o.result);
        assert.equal(s.tasks, 3 * 8 * 2);
        assert.ok(s.rejected >= 8, `rejected ${s.rejected}`);
        // Not sealed under this launch's key: refused before its launch id is even read.
        if (processes === 'per-stage')
          assert.ok(
            o.result.rejects.some((r) =>
              /^stage 1: "baton\.relaunch-per-stage\.activation\.1": a message without a seal \(unauthenticated\)/.test(
                r,
              ),
            ),
            o.result.rejects.join('\n'),
          );
        // A single-process run streams no trace batches: it reads its stages' events in process.
        if (processes === 'per-stage')
          assert.ok(
            o.result.rejects.some((r) =>
              /^launcher: "baton\.relaunch-per-stage\.trace\.0": refused a message without a seal \(unauthenticated\)/.test(
                r,
              ),
            ),
            o.result.rejects.join('\n'),
          );
        assert.deepEqual(
          o.result.events.filter((e) => e.type === 'reject' && /duplicate input/.test(e.detail)),
          [],
          'no real activation was refused',
        );
      } finally {
        await orphan.close();
      }
    });
  }

  it("fails at once when the launcher's own iteration callback fails (a checkpoint that cannot be written)", async () => {
    const cfg = bfUniform('cbfail', 2, 4, { iterations: 3 });
    const t0 = Date.now();
    await assert.rejects(
      runOnce(cfg, {
        transport: 'nats',
        processes: 'per-stage',
        natsUrl: server().url,
        onIteration: () => {
          throw new Error('disk full');
        },
      }),
      (e: Error) => e.name === 'JobError' && /actor coordinator failed: disk full/.test(e.message),
    );
    assert.ok(Date.now() - t0 < 10_000, `failed after ${Date.now() - t0} ms (the stall watchdog is 30 s)`);
  });

  it('refuses a second job of the same name on a shared server, and the first one completes', async () => {
    // The second launch waits for the first one's activations (its stages are up and running),
    // not for a fixed time, which a fast machine outran: the first job had ended and freed its name.
    const cfg = bfUniform('twin', 2, 8, { iterations: 6 });
    const watch = await NatsBus.connect(server().url);
    let running: () => void = () => {};
    const started = new Promise<void>((r) => (running = r));
    watch.subscribe('baton.twin.activation.>', () => running());
    await watch.flush();
    try {
      const first = runOnce(cfg, { transport: 'nats', processes: 'per-stage', natsUrl: server().url });
      await Promise.race([started, first]);
      await assert.rejects(
        runOnce(cfg, { transport: 'nats', processes: 'per-stage', natsUrl: server().url }),
        (e: Error) => e.name === 'JobNameTakenError' && /job twin is already running/.test(e.message),
      );
      assert.equal(summarize((await first).result).tasks, 6 * 2 * 8 * 2);
    } finally {
      await watch.close();
    }
  });

  it('refuses to start a second node agent of a name already in use', async () => {
    const first = nodeAgent(server().url, KEY.file, 'dupe');
    try {
      const ready = await new Promise<string>((resolve) =>
        first.stdout!.once('data', (d: Buffer) => resolve(d.toString())),
      );
      // The line node --help describes.
      assert.deepEqual(Object.keys(JSON.parse(ready) as object), ['node', 'pid', 'nats', 'ready']);
      const second = spawn(
        process.execPath,
        [CLI, 'node', '--nats', server().url, '--key-file', KEY.file, '--name', 'dupe'],
        {
          stdio: ['ignore', 'ignore', 'pipe'],
        },
      );
      let err = '';
      second.stderr!.on('data', (d: Buffer) => (err += d.toString()));
      const code = await new Promise<number | null>((resolve) => second.once('exit', (c) => resolve(c)));
      assert.equal(code, 2, err);
      assert.match(err, new RegExp(`a node named dupe is already running on .* \\(pid ${first.pid} on `));
    } finally {
      first.kill('SIGTERM');
    }
  });

  it('lets a node agent stopped with SIGTERM exit within seconds even while its server does not answer', async () => {
    const own = await startNatsServer();
    const agent = nodeAgent(own.url, KEY.file, 'unheard');
    try {
      await agentsReady([agent]);
      process.kill(own.pid, 'SIGSTOP');
      const exited = new Promise<number | null>((resolve) => agent.once('exit', (code) => resolve(code)));
      const t0 = Date.now();
      agent.kill('SIGTERM');
      const code = await Promise.race([
        exited,
        new Promise<string>((resolve) => setTimeout(() => resolve('still running'), 8000)),
      ]);
      assert.equal(code, 0, `after ${Date.now() - t0} ms`);
    } finally {
      process.kill(own.pid, 'SIGCONT');
      agent.kill('SIGKILL');
      await own.stop();
    }
  });

  it('lets the stage processes it starts load a profile file its user named (baton node --allow-files)', async () => {
    const profile = path.join(__dirname, '..', '..', 'models', 'profiles', 'uniform.json');
    const cfg = resolveConfig({ job: 'profilefile', stages: 2, microbatches: 4, policy: 'bf', profile });
    const outcome = await runOnce(cfg, { transport: 'nats', processes: 'per-stage', natsUrl: server().url });
    assert.equal(outcome.processes, 2);
  });

  // With the stage processes' connections and with every stage on the launcher's own.
  for (const [processes, job, where] of [
    ['per-stage', 'serverdied', ''],
    ['single', 'serverdied1', ' with every stage in the launcher (--processes single)'],
  ] as const) {
    it(`fails at once, saying so, when its NATS server goes away mid-job${where}`, async () => {
      const own = await startNatsServer();
      try {
        const cfg = longJob(job, { stallTimeoutMs: 60_000 });
        let t0 = 0;
        const run = runOnce(cfg, {
          transport: 'nats',
          processes,
          natsUrl: own.url,
          onIteration: () => {
            if (!t0) {
              t0 = Date.now();
              process.kill(own.pid, 'SIGKILL');
            }
          },
        });
        await assert.rejects(
          run,
          (e: Error) =>
            e.name === 'JobError' &&
            /lost the connection to NATS at nats:\/\/127\.0\.0\.1:\d+: messages in flight are lost/.test(e.message),
        );
        assert.ok(Date.now() - t0 < 5000, `noticed after ${Date.now() - t0} ms`);
      } finally {
        await own.stop();
      }
    });
  }

  it('keeps a node agent process serving through malformed variants of every message on its subjects, and a job then completes', async () => {
    // One agent process hosts both stages; a vandal hears everything and sends back
    // malformed variants (test/fuzz-gen.ts) of what it heard, on the subject it heard it on.
    const agent = nodeAgent(server().url, KEY.file, 'fuzzed');
    const vandal = await NatsBus.connect(server().url);
    const rng = new Rng(FUZZ_SEED);
    const heard: { subject: string; data: Uint8Array }[] = [];
    let sent = 0;
    vandal.subscribe('baton.>', (subject, data) => {
      if (heard.length < 500) heard.push({ subject, data: Uint8Array.from(data) });
    });
    const junk = setInterval(() => {
      for (let k = 0; k < 10 && heard.length > 0; k++) {
        const { subject, data } = rng.pick(heard);
        const bytes = malformed(data, rng);
        // Only what no Baton peer sends: a message that still decodes could be the job's own
        // (or an agent's exit, abort or finish request, which it obeys).
        try {
          if (decodeValue(bytes) !== null) continue;
        } catch {
          /* malformed: sent */
        }
        vandal.publish(subject, bytes);
        sent++;
      }
    }, 5);
    try {
      await agentsReady([agent]);
      for (const job of ['fuzzed1', 'fuzzed2']) {
        const cfg = resolveConfig({ job, stages: 2, microbatches: 8, iterations: 3, policy: 'bf', profile: 'uniform' });
        const o = await runOnce(cfg, {
          transport: 'nats',
          processes: 'per-stage',
          natsUrl: server().url,
          nodes: ['fuzzed'],
          nodeKey: KEY.key,
        });
        assert.equal(summarize(o.result).tasks, 3 * 2 * 8 * 2);
      }
      assert.ok(sent > 100, `sent ${sent}`);
      assert.equal(agent.exitCode, null, 'the agent process is still running');
      assert.equal(vandal.errors, 0);
    } finally {
      clearInterval(junk);
      await vandal.close();
      agent.kill('SIGTERM');
    }
  });

  it('fails at once, naming it, when a node agent of a --nodes run is stopped mid-job', async () => {
    const agents = ['left1', 'left2'].map((name) => nodeAgent(server().url, KEY.file, name));
    try {
      await agentsReady(agents);
      const cfg = longJob('left');
      let t0 = 0;
      const run = runOnce(cfg, {
        transport: 'nats',
        processes: 'per-stage',
        natsUrl: server().url,
        nodes: ['left1', 'left2'],
        nodeKey: KEY.key,
        onIteration: () => {
          if (!t0) {
            t0 = Date.now();
            agents[1].kill('SIGTERM');
          }
        },
      });
      await assert.rejects(
        run,
        (e: Error) => e.name === 'JobError' && /node left2 left during the job \(SIGTERM\)/.test(e.message),
      );
      assert.ok(Date.now() - t0 < 5000, `noticed after ${Date.now() - t0} ms`);
    } finally {
      for (const a of agents) a.kill('SIGTERM');
    }
  });

  it("fails at once, naming the node, when a node agent's connection is cut (a slow consumer) and comes back: what was in flight to it is lost", async () => {
    // A server that cuts a client at 2 MB pending; a stopped agent stops reading.
    const own = await startNatsServer({ maxPayload: 1 << 20, maxPending: 2 << 20 });
    const agents = ['cut1', 'cut2'].map((name) => nodeAgent(own.url, KEY.file, name));
    const vandal = await NatsBus.connect(own.url);
    try {
      await agentsReady(agents);
      const cfg = longJob('cut', { stallTimeoutMs: 60_000 });
      let resumed = 0;
      let cut = false;
      const run = runOnce(cfg, {
        transport: 'nats',
        processes: 'per-stage',
        natsUrl: own.url,
        nodes: ['cut1', 'cut2'],
        nodeKey: KEY.key,
        onIteration: () => {
          if (cut) return;
          cut = true;
          void (async () => {
            process.kill(agents[1].pid!, 'SIGSTOP');
            for (let i = 0; i < 64 && !/Slow Consumer/.test(own.log()); i++) {
              vandal.publish('baton._nodes.cut2', new Uint8Array(1 << 20));
              await vandal.flush();
            }
            process.kill(agents[1].pid!, 'SIGCONT');
            resumed = Date.now();
          })();
        },
      });
      await assert.rejects(
        run,
        (e: Error) =>
          e.name === 'JobError' &&
          /node cut2 left during the job \(its connection to NATS at nats:\/\/127\.0\.0\.1:\d+ dropped: messages in flight to its stages were lost\)/.test(
            e.message,
          ),
      );
      assert.match(own.log(), /Slow Consumer/);
      assert.ok(
        resumed > 0 && Date.now() - resumed < 15_000,
        `noticed ${Date.now() - resumed} ms after the agent resumed`,
      );
    } finally {
      endAgents(agents, 'SIGTERM');
      await vandal.close();
      await own.stop();
    }
  });

  it('fails naming the node, not as a deadlock, when a node agent of a --nodes run is killed mid-job', async () => {
    const agents = ['gone1', 'gone2'].map((name) => nodeAgent(server().url, KEY.file, name));
    try {
      await agentsReady(agents);
      const cfg = longJob('gone', { stallTimeoutMs: 2000 });
      let killed = false;
      const bus = await NatsBus.connect(server().url);
      // A lease longer than the stall timeout: the node's missing heartbeats, not the lease, tell first.
      const run = runDistributed(cfg, {
        bus: new AuthBus(bus, KEY.key, 'launcher'),
        nodes: ['gone1', 'gone2'],
        leaseMs: 60000,
        onIteration: () => {
          if (!killed) {
            killed = true;
            agents[1].kill('SIGKILL');
          }
        },
      });
      try {
        // Its missing heartbeats tell first; on a loaded machine the launcher's heartbeat watch
        // may have been held (it then gives every node a fresh window) and the stall watchdog
        // tells instead, naming the same node. Either way gone2 alone, and no deadlock.
        await assert.rejects(
          run,
          (e: Error) =>
            e.name === 'JobError' &&
            (/node gone2 \(pid \d+\) sent no heartbeat for \d+ ms: dead or stopped/.test(e.message) ||
              /^node\(s\) gone2 answered nothing within 5 s after the job made no progress/.test(e.message)),
        );
      } finally {
        await bus.close();
      }
    } finally {
      for (const a of agents) a.kill('SIGTERM');
    }
  });

  it('completes, refusing it as unauthenticated, when a stranger sends a malformed trace batch carrying its launch id', async () => {
    const vandal = await NatsBus.connect(server().url);
    const cfg = resolveConfig({ job: 'badtrace', stages: 2, microbatches: 4, policy: 'bf', profile: 'uniform' });
    // The vandal learns the run's launch id from a start message (a batch without it is not this run's, and is only counted).
    vandal.subscribe('baton.badtrace.control.0', (_s, d) =>
      vandal.publish(
        'baton.badtrace.trace.0',
        encodeValue({
          launch: decodeEnvelope(d).launch,
          events: [{}, { ...activationSend(1, 0, 0), bytes: 'lots' }],
        }),
      ),
    );
    await vandal.flush();
    try {
      const o = await runOnce(cfg, { transport: 'nats', processes: 'per-stage', natsUrl: server().url });
      assert.equal(summarize(o.result).tasks, 2 * 4 * 2);
      assert.ok(
        o.result.rejects.some((r) =>
          /^launcher: "baton\.badtrace\.trace\.0": refused a message without a seal \(unauthenticated\)/.test(r),
        ),
        o.result.rejects.join('\n'),
      );
    } finally {
      await vandal.close();
    }
  });
});

describe('a job over a three-server NATS cluster', function () {
  this.timeout(120_000);

  it('completes with stages connected to different servers', async () => {
    const a = await startNatsServer({ cluster: true, monitor: true, name: 'A' });
    const b = await startNatsServer({ routes: [a.clusterUrl!], monitor: true, name: 'B' });
    const c = await startNatsServer({ routes: [a.clusterUrl!], monitor: true, name: 'C' });
    const children: ChildProcess[] = [];
    const bus = await NatsBus.connect(a.url);
    try {
      await Promise.all([a.waitForRoutes(2), b.waitForRoutes(2), c.waitForRoutes(2)]);
      const servers = [a, b, c, b];
      const names = servers.map((_, i) => `cl-node${i}`);
      names.forEach((name, i) =>
        children.push(
          spawn(
            process.execPath,
            [CLI, 'node', '--nats', servers[i].url, '--key-file', KEY.file, '--name', name, '--quiet'],
            {
              stdio: 'ignore',
            },
          ),
        ),
      );
      const cfg = resolveConfig({ job: 'cluster', stages: 4, microbatches: 8, policy: 'bf', profile: 'uniform' });
      const r = await runDistributed(cfg, { bus: new AuthBus(bus, KEY.key, 'launcher'), nodes: names, settleMs: 500 });
      assert.equal(r.nodes.length, 4);
      assert.deepEqual(
        r.nodes.map((n) => n.stages),
        [[0], [1], [2], [3]],
      );
      assert.equal(summarize(r).tasks, 4 * 8 * 2);
    } finally {
      for (const ch of children) ch.kill('SIGTERM');
      await bus.close();
      await Promise.all([a.stop(), b.stop(), c.stop()]);
    }
  });
});

/** Pids of processes whose command line contains every one of `parts` (Linux /proc). */
function pidsWith(...parts: string[]): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const cmd = readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0').join(' ');
      if (parts.every((p) => cmd.includes(p))) out.push(Number(d));
    } catch {
      /* gone meanwhile */
    }
  }
  return out;
}

async function waitUntil(pred: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * `baton run --job <job>` of 3 stages, 8 microbatches and `iterations` iterations with its own
 * nats-server; its stderr is collected, its stdout piped or ignored.
 */
function launchRun(job: string, iterations: number, stdout: 'pipe' | 'ignore') {
  const launcher = spawn(
    process.execPath,
    [CLI, 'run', '--job', job, '--stages', '3', '--microbatches', '8', '--iterations', String(iterations), '--json'],
    { stdio: ['ignore', stdout, 'pipe'] },
  );
  let err = '';
  launcher.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exit = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
    launcher.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return { launcher, exit, stderr: () => err };
}

describe('baton run, when its job is cut short', function () {
  this.timeout(60_000);
  const server = natsServerForSuite();

  /** A long `baton run` (its own nats-server, one process per stage) and its stage pids, once they run. */
  async function longRun(job: string) {
    const { launcher, exit, stderr } = launchRun(job, 10000, 'pipe');
    await waitUntil(() => pidsWith('node', '--name', `${job}-stage`).length === 3, 20_000, 'three stage processes');
    await new Promise((r) => setTimeout(r, 500));
    return { launcher, exit, stderr, stages: pidsWith('node', '--name', `${job}-stage`) };
  }

  for (const sig of ['SIGTERM', 'SIGINT'] as const) {
    it(`stops its stage processes and its nats-server on ${sig}, then ends by the signal`, async () => {
      const job = `cut-${sig.toLowerCase()}-${process.pid}`;
      const run = await longRun(job);
      const servers = pidsWith('nats-server').filter(
        (p) => readFileSync(`/proc/${p}/stat`, 'utf8').split(' ')[3] === String(run.launcher.pid),
      );
      assert.equal(servers.length, 1, 'the launcher started one nats-server');
      for (const p of run.stages) {
        const argv = readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0');
        assert.deepEqual(
          argv.slice(1, 1 + stageNodeFlags().length),
          [...stageNodeFlags()],
          'stage processes run with the stage Node flags',
        );
      }
      run.launcher.kill(sig);
      const { signal } = await run.exit;
      assert.equal(signal, sig);
      await waitUntil(
        () => run.stages.every((p) => !isAlive(p)) && !isAlive(servers[0]),
        10_000,
        'the stage processes and the server to end',
      );
    });
  }

  it('ends at once when a stage process dies while the job is being set up', async () => {
    const job = `cut-early-${process.pid}`;
    const { exit, stderr } = launchRun(job, 3, 'ignore');
    await waitUntil(() => pidsWith('node', '--name', `${job}-stage1`).length === 1, 20_000, 'stage process 1');
    const t0 = Date.now();
    process.kill(pidsWith('node', '--name', `${job}-stage1`)[0], 'SIGKILL');
    assert.equal((await exit).code, 1);
    assert.ok(Date.now() - t0 < 8_000, `the launcher ended ${Date.now() - t0} ms after the kill`);
    assert.match(stderr(), new RegExp(`stage process ${job}-stage1-[0-9a-f]+ .* ended during the job`));
  });

  it("ends promptly when signalled while it collects the nodes' final reports", async () => {
    const job = `cut-finish-${process.pid}`;
    const watcher = await NatsBus.connect(server().url);
    const launcher = spawn(
      process.execPath,
      [
        CLI,
        'run',
        '--nats',
        server().url,
        '--job',
        job,
        '--stages',
        '3',
        '--microbatches',
        '4',
        '--iterations',
        '2',
        '--json',
      ],
      { stdio: 'ignore' },
    );
    const exit = new Promise<string | null>((resolve) => launcher.once('exit', (_code, signal) => resolve(signal)));
    let signalledAt = 0;
    watcher.subscribe(`baton.${job}.node.*`, (_s, d) => {
      try {
        if (!signalledAt && (decodeValue(d) as { verb?: string }).verb === 'finish') {
          signalledAt = Date.now();
          launcher.kill('SIGTERM');
        }
      } catch {
        /* not a request */
      }
    });
    await watcher.flush();
    try {
      assert.equal(await exit, 'SIGTERM');
      assert.ok(signalledAt > 0, 'the launcher reached the finish requests');
      assert.ok(Date.now() - signalledAt < 8_000, `ended ${Date.now() - signalledAt} ms after the signal`);
    } finally {
      await watcher.close();
    }
  });

  it('leaves no stage process or nats-server behind when it is killed with SIGKILL', async () => {
    const job = `cut-sigkill-${process.pid}`;
    const run = await longRun(job);
    const servers = pidsWith('nats-server').filter(
      (p) => readFileSync(`/proc/${p}/stat`, 'utf8').split(' ')[3] === String(run.launcher.pid),
    );
    run.launcher.kill('SIGKILL');
    await run.exit;
    try {
      await waitUntil(
        () => run.stages.every((p) => !isAlive(p)) && servers.every((p) => !isAlive(p)),
        10_000,
        'the stage processes and the server to end',
      );
    } finally {
      for (const p of [...run.stages, ...servers]) if (isAlive(p)) process.kill(p, 'SIGKILL');
    }
  });

  it('fails at once, naming it, when a stage process dies', async () => {
    const job = `cut-kill-${process.pid}`;
    const run = await longRun(job);
    const victim = pidsWith('node', '--name', `${job}-stage1`)[0];
    const t0 = Date.now();
    process.kill(victim, 'SIGKILL');
    const { code } = await run.exit;
    assert.equal(code, 1);
    assert.ok(Date.now() - t0 < 10_000, `noticed after ${Date.now() - t0} ms`);
    assert.match(
      run.stderr(),
      new RegExp(`stage process ${job}-stage1-[0-9a-f]+ \\(pid ${victim}\\) ended during the job \\(signal SIGKILL\\)`),
    );
    await waitUntil(() => run.stages.every((p) => !isAlive(p)), 10_000, 'the other stage processes to end');
  });
});
