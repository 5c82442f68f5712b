import { smallMlpJob } from './helpers-train';
import { bfUniform } from './helpers-job';
import { strict as assert } from 'assert';
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'fs';
import { spawnSync } from 'child_process';
import * as os from 'os';
import * as path from 'path';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { summarize } from '../job/run-local';
import { runOnce } from '../cli/run';
import { train } from '../cli/train';
import { startNatsServer } from '../transport/nats-server';
import { sharedServerUsers } from '../job/nats-users';
import { urlWithUser } from '../cli/own-server';
import { authInit } from '../cli/auth-init';
import { findNatsServer } from '../transport/nats-server-binary';
import { NatsBus } from '../transport/nats-bus';
import { AuthBus } from '../transport/auth-bus';
import { newJobKey } from '../transport/auth-seal';
import { newNodeAgent } from '../job/node-host';
import { PermissionDeniedError } from '../job/job-errors';
import type { NatsUser } from '../job/nats-users';

/** `p`, or a rejection once `ms` have passed without it settling (a hang fails the test, and its cleanup runs). */
async function within<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`still running after ${ms} ms: a hang`)), ms);
  });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Standalone agents `nodes` on `url`, each logged in as its own user of `users` (as with the .env files of baton auth init). */
async function agentsAs(url: string, nodes: readonly string[], users: readonly NatsUser[], key: Uint8Array) {
  const buses = await Promise.all(users.map((u) => NatsBus.connect(urlWithUser(url, u))));
  const agents = buses.map((b, i) => newNodeAgent({ name: nodes[i], bus: new AuthBus(b, key, `node:${nodes[i]}`) }));
  agents.forEach((a) => a.start());
  return {
    stop: async () => {
      for (const a of agents) a.leave('test over');
      await Promise.all(buses.map((b) => b.close()));
    },
  };
}

/** What the server answered a raw nats.js client: its refusal to connect, or the errors of its publishes and subscriptions. */
interface Intrusion {
  refused?: string;
  errors: string[];
}

/** A raw nats.js client at `url` (credentials in it, or none) publishing on `pub` and subscribing to `sub`. */
async function intrude(url: string, pub: readonly string[], sub: readonly string[]): Promise<Intrusion> {
  const u = new URL(url);
  let nc: NatsConnection;
  try {
    nc = await connect({
      servers: `${u.hostname}:${u.port}`,
      ...(u.username ? { user: decodeURIComponent(u.username), pass: decodeURIComponent(u.password) } : {}),
      reconnect: false,
      name: 'intruder',
    });
  } catch (e) {
    return { refused: (e as Error).message, errors: [] };
  }
  const errors: string[] = [];
  void (async () => {
    for await (const s of nc.status()) if (s.type === 'error') errors.push(String(s.error?.message ?? s.error));
  })().catch(() => {});
  for (const s of sub) nc.subscribe(s, { callback: () => {} });
  for (const s of pub) nc.publish(s, new Uint8Array([0xa0]));
  const want = pub.length + sub.length;
  for (let i = 0; i < 100 && errors.length < want; i++) await new Promise((r) => setTimeout(r, 20));
  await nc.close().catch(() => {});
  return { errors };
}

const violations = (i: Intrusion, kind: 'Publish' | 'Subscription') =>
  i.errors.filter((e) => new RegExp(`Permissions Violation for ${kind}`).test(e));

const trainCfg = (job: string) => smallMlpJob(job, mkdtempSync(path.join(os.tmpdir(), `baton-fence-${job}-`)), 0);

describe('NATS-level fencing: accounts, generated credentials, per-process permissions', function () {
  this.timeout(240_000);

  it("a run on Baton's own server: no credentials is an Authorization Violation, the read-only tap user cannot publish or read other subjects, the job is unaffected", async () => {
    const cfg = bfUniform('fenced', 3, 8, { iterations: 3 });
    const clean = summarize((await runOnce(cfg, { transport: 'nats', processes: 'per-stage' })).result);
    let attacks: Promise<Intrusion[]> | null = null;
    let serverLog = () => '';
    const o = await runOnce(cfg, {
      transport: 'nats',
      processes: 'per-stage',
      onServer: ({ url, tapUrlFile, log }) => {
        serverLog = log;
        const tap = readFileSync(tapUrlFile, 'utf8').trim();
        attacks = Promise.all([
          intrude(url, ['baton.fenced.activation.1'], ['baton.fenced.>']),
          intrude(tap, ['baton.fenced.activation.1', 'baton.fenced.control.0'], ['baton._nodes.>', '>']),
        ]);
      },
    });
    const [none, tap] = await (attacks as unknown as Promise<Intrusion[]>);
    assert.match(none.refused ?? '', /Authorization Violation/i, JSON.stringify(none));
    assert.equal(violations(tap, 'Publish').length, 2, tap.errors.join('\n'));
    assert.equal(violations(tap, 'Subscription').length, 2, tap.errors.join('\n'));
    // The job's own processes (launcher, stage processes, their heartbeats) stayed inside their permissions.
    const own = serverLog()
      .split('\n')
      .filter((l) => /Violation/.test(l) && !/intruder/.test(l));
    assert.deepEqual(own, []);
    assert.ok(/Violation/.test(serverLog()), 'the server logged the intruders');
    const hit = summarize(o.result);
    assert.equal(hit.tasks, clean.tasks);
    assert.equal(hit.messages, clean.messages);
    assert.equal(hit.rejected, 0);
    assert.equal(o.processes, 3);
  });

  it("a training job on Baton's own server gets the same param_checksum with intruders refused", async () => {
    const setup = { transport: 'nats' as const, processes: 'per-stage' as const };
    const clean = await train(trainCfg('tfence'), setup);
    let attacks: Promise<Intrusion> | null = null;
    const hit = await train(trainCfg('tfence'), {
      ...setup,
      onServer: ({ url }) => (attacks = intrude(url, ['baton.tfence.report'], ['baton.tfence.>'])),
    });
    const none = await (attacks as unknown as Promise<Intrusion>);
    assert.match(none.refused ?? '', /Authorization Violation/i);
    assert.equal(hit.param_checksum, clean.param_checksum);
    assert.equal(hit.final_loss, clean.final_loss);
  });

  it("on a shared server configured as baton auth init writes it, another job's credentials get Permissions Violation on the job's subjects", async () => {
    const nodes = ['n0', 'n1'];
    const mine = sharedServerUsers('tshared', nodes, { stages: 3, chunks: 1 });
    const theirs = sharedServerUsers('other', nodes, { stages: 3, chunks: 1 });
    const server = await startNatsServer({ users: [mine.launcher, ...mine.nodes, theirs.launcher, ...theirs.nodes] });
    const key = newJobKey();
    // Standalone agents, each logged in as its own user (as with the .env files of baton auth init).
    const buses = await Promise.all(mine.nodes.map((u) => NatsBus.connect(urlWithUser(server.url, u))));
    const agents = buses.map((b, i) => newNodeAgent({ name: nodes[i], bus: new AuthBus(b, key, `node:${nodes[i]}`) }));
    agents.forEach((a) => a.start());
    try {
      const cfg = bfUniform('tshared', 3, 8, { iterations: 3 });
      const setup = {
        transport: 'nats' as const,
        processes: 'per-stage' as const,
        natsUrl: urlWithUser(server.url, mine.launcher),
        nodes,
        nodeKey: key,
      };
      const clean = summarize((await runOnce(cfg, setup)).result);
      const attacks = Promise.all(
        [theirs.launcher, theirs.nodes[1]].map((u) =>
          intrude(
            urlWithUser(server.url, u),
            ['baton.tshared.activation.1', 'baton.tshared.node.reply.x', 'baton.tshared.claim'],
            ['baton.tshared.>', 'baton.tshared.report'],
          ),
        ),
      );
      const none = intrude(server.url, ['baton.tshared.report'], []);
      const hit = summarize((await runOnce(cfg, setup)).result);
      for (const i of await attacks) {
        assert.equal(i.refused, undefined);
        assert.equal(violations(i, 'Publish').length, 3, i.errors.join('\n'));
        assert.equal(violations(i, 'Subscription').length, 2, i.errors.join('\n'));
      }
      assert.match((await none).refused ?? '', /Authorization Violation/i);
      assert.equal(hit.tasks, clean.tasks);
      assert.equal(hit.messages, clean.messages);
      assert.equal(hit.rejected, 0);
      // The launcher and the agents, each as its own user, stayed inside their permissions.
      const own = server
        .log()
        .split('\n')
        .filter((l) => /Violation/.test(l) && !/intruder/.test(l));
      assert.deepEqual(own, []);
    } finally {
      for (const a of agents) a.leave('test over');
      await Promise.all(buses.map((b) => b.close()));
      await server.stop();
    }
  });

  it('on a shared server, users made for the chunks run an interleaved job; users made for V=1 fail it at once, naming the refused subject', async () => {
    const nodes = ['c0', 'c1'];
    const straight = sharedServerUsers('tchunk', nodes, { stages: 2, chunks: 1 });
    const chunked = sharedServerUsers('tchunk2', nodes, { stages: 2, chunks: 2 });
    const server = await startNatsServer({
      users: [straight.launcher, ...straight.nodes, chunked.launcher, ...chunked.nodes],
    });
    const key = newJobKey();
    // A stall would take 30 s: a refusal must end the job long before.
    const cfg = (job: string) => bfUniform(job, 2, 4, { chunks: 2, iterations: 2, stallTimeoutMs: 30_000 });
    const setup = (u: NatsUser) => ({
      transport: 'nats' as const,
      processes: 'per-stage' as const,
      natsUrl: urlWithUser(server.url, u),
      nodes,
      nodeKey: key,
    });
    try {
      const ok = await agentsAs(server.url, nodes, chunked.nodes, key);
      try {
        const done = summarize((await runOnce(cfg('tchunk2'), setup(chunked.launcher))).result);
        assert.equal(done.rejected, 0);
        assert.ok(done.tasks > 0);
      } finally {
        await ok.stop();
      }
      const short = await agentsAs(server.url, nodes, straight.nodes, key);
      const t0 = Date.now();
      try {
        await assert.rejects(within(runOnce(cfg('tchunk'), setup(straight.launcher)), 60_000), (e: Error) => {
          assert.ok(e instanceof PermissionDeniedError, `${e.name}: ${e.message}`);
          assert.equal(e.subject, 'baton.tchunk.activation.0');
          assert.equal(e.operation, 'publish');
          assert.match(e.message, /node c1 \(stages 1\).*refused a publish on "baton\.tchunk\.activation\.0"/);
          return true;
        });
      } finally {
        await short.stop();
      }
      assert.ok(Date.now() - t0 < 20_000, `failed after ${Date.now() - t0} ms`);
    } finally {
      await server.stop();
    }
  });

  it('a launcher whose user may not publish gradients: a --processes single job fails at once, naming the refused subject', async () => {
    const kinds = [
      'control',
      'data',
      'activation',
      'report',
      'trace',
      'stats',
      'claim',
      'policy',
      'state',
      'resend',
      'node',
    ];
    const launcher: NatsUser = {
      user: 'nograd',
      password: 'pw-nograd',
      publish: kinds.flatMap((k) => [`baton.tng.${k}`, `baton.tng.${k}.>`]),
      subscribe: ['baton.tng.>', '_INBOX.>'],
    };
    const server = await startNatsServer({ users: [launcher] });
    const t0 = Date.now();
    try {
      const cfg = bfUniform('tng', 2, 4, { iterations: 2, stallTimeoutMs: 30_000 });
      const run = runOnce(cfg, { transport: 'nats', processes: 'single', natsUrl: urlWithUser(server.url, launcher) });
      await assert.rejects(within(run, 60_000), (e: Error) => {
        assert.ok(e instanceof PermissionDeniedError, `${e.name}: ${e.message}`);
        assert.equal(e.subject, 'baton.tng.gradient.0');
        assert.match(e.message, /^the launcher: the NATS server refused a publish on "baton\.tng\.gradient\.0"/);
        return true;
      });
    } finally {
      await server.stop();
    }
    assert.ok(Date.now() - t0 < 20_000, `failed after ${Date.now() - t0} ms`);
  });

  it('baton auth init writes an accounts snippet nats-server takes, and credential files of mode 600', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'baton-auth-init-'));
    const printed = JSON.parse(
      authInit([path.join(dir, 'out'), '--job', 'aj', '--nodes', 'n0,n1', '--stages', '3', '--json']),
    ) as { config: string; credentials: Record<string, string> };
    assert.deepEqual(Object.keys(printed.credentials), ['aj-launcher', 'aj-n0', 'aj-n1']);
    for (const f of [printed.config, ...Object.values(printed.credentials)])
      assert.equal(statSync(f).mode & 0o777, 0o600, f);
    assert.match(
      readFileSync(printed.credentials['aj-n0'], 'utf8'),
      /^BATON_NATS_URL=nats:\/\/aj-n0:[\w-]+@127\.0\.0\.1:4222\n$/,
    );
    const conf = path.join(dir, 'server.conf');
    writeFileSync(conf, `listen: "127.0.0.1:4222"\ninclude ./out/nats-accounts.conf\n`);
    const checked = spawnSync(findNatsServer(), ['-t', '-c', conf], { encoding: 'utf8' });
    assert.equal(checked.status, 0, checked.stdout + checked.stderr);
    assert.doesNotMatch(readFileSync(printed.config, 'utf8'), /^authorization/m);
  });

  it('baton auth init --chunks 2 lets the last stage feed stage 0 and stage 0 return its gradient; without it, not; --chunks 0 is refused', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'baton-auth-chunks-'));
    const userLine = (conf: string, user: string) => conf.split('\n').find((l) => l.includes(`user: "${user}"`)) ?? '';
    const init = (out: string, more: string[]) =>
      JSON.parse(authInit([path.join(dir, out), '--job', 'ac', '--nodes', 'n0,n1', '--stages', '2', ...more, '--json']))
        .config as string;
    const chunked = readFileSync(init('v2', ['--chunks', '2']), 'utf8');
    const straight = readFileSync(init('v1', []), 'utf8');
    assert.match(userLine(chunked, 'ac-n1'), /"baton\.ac\.activation\.0"/);
    assert.match(userLine(chunked, 'ac-n0'), /"baton\.ac\.gradient\.1"/);
    assert.doesNotMatch(userLine(straight, 'ac-n1'), /"baton\.ac\.activation\.0"/);
    assert.doesNotMatch(userLine(straight, 'ac-n0'), /"baton\.ac\.gradient\.1"/);
    assert.throws(() => init('v0', ['--chunks', '0']), /--chunks V must be from 1 to 64, got 0/);
  });
});
