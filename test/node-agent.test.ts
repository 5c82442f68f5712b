import { strict as assert } from 'assert';
import * as path from 'path';
import { JobConfig, resolveConfig } from '../job/config';
import { ANNOUNCE_SUBJECT, MIN_LEASE_MS, NODES_PREFIX, nodeSubject } from '../actors/node-agent';
import { DistributedOptions, DistributedResult, replyProblem, runDistributed } from '../job/run-distributed';
import { exitCodeFor } from '../cli/main';
import { distinctProcesses } from '../cli/run';
import { JobNameTakenError, claimJob } from '../job/job-claim';
import { TRAIN_DEFAULTS } from '../job/defaults';
import { decodeValue, encodeValue } from '../transport/codec';
import { LocalBus } from '../transport/local-bus';
import { PayloadTooLargeError } from '../transport/nats-bus';
import { MAX_REJECTS_DESCRIBED, newRejectTally, tallyReject } from '../base/reject-tally';
import { newNodeAgent, realPath } from '../job/node-host';
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'fs';
import * as os from 'os';
import { bfUniform } from './helpers-job';
import { idleStatus } from './helpers-stage';

const REPLY = `${NODES_PREFIX}.reply.test`;

/** A node agent on an in-process bus, with what it answers and logs. */
function agentOnLocalBus() {
  const bus = new LocalBus();
  const logs: string[] = [];
  const replies: Record<string, unknown>[] = [];
  const hellos: Record<string, unknown>[] = [];
  bus.subscribe(REPLY, (_s, d) => replies.push(decodeValue(d) as Record<string, unknown>));
  bus.subscribe(ANNOUNCE_SUBJECT, (_s, d) => hellos.push(decodeValue(d) as Record<string, unknown>));
  const agent = newNodeAgent({ name: 'n1', bus, log: (l) => logs.push(l) });
  agent.start();
  const request = (req: Record<string, unknown>) => bus.publish(nodeSubject('n1'), encodeValue(req));
  return { bus, agent, logs, replies, hellos, request };
}

const settle = () => new Promise((r) => setTimeout(r, 20));

/**
 * `cfg` run by a launcher on `bus` with one silent agent, n1, hosting every stage;
 * `meanwhile` runs once the launch has begun. The bus is closed after.
 */
async function runOnAgentN1(
  bus: LocalBus,
  cfg: JobConfig,
  opts: Partial<DistributedOptions> = {},
  meanwhile?: () => void,
): Promise<DistributedResult> {
  newNodeAgent({ name: 'n1', bus, log: () => {} }).start();
  try {
    const running = runDistributed(cfg, { bus, nodes: ['n1'], settleMs: 0, ...opts });
    meanwhile?.();
    return await running;
  } finally {
    await bus.close();
  }
}

async function until(pred: () => boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A training job small enough that loading its backend is the only slow part. */
const TINY_MLP_TRAIN = {
  ...TRAIN_DEFAULTS,
  model: 'mlp' as const,
  microbatchSize: 2,
  seq: 4,
  layers: 2,
  width: 8,
  totalIterations: 1,
  valBatches: 1,
};

describe('the node agent', () => {
  it('survives a request whose reply subject it cannot publish to, and keeps serving', async () => {
    const { agent, logs, hellos, request } = agentOnLocalBus();
    const before = hellos.length;
    for (const reply of [`${NODES_PREFIX}.reply.>`, `${NODES_PREFIX}.reply.a b`, `${NODES_PREFIX}.reply..x`]) {
      request({ verb: 'nope', reply });
      request({ verb: 'status', reply, job: 'j' });
    }
    await settle();
    assert.ok(agent.rejected >= 3, `rejected ${agent.rejected}`);
    assert.ok(
      logs.some((l) => /cannot answer on/.test(l)),
      logs.join('\n'),
    );
    request({ verb: 'ping' });
    await settle();
    assert.equal(hellos.length, before + 1, 'the agent still answers after the bad requests');
  });

  it('refuses to host a stage twice and leaves nothing of the refused job behind', async () => {
    const { bus, replies, request } = agentOnLocalBus();
    const subscriptions = bus.subscriptionCount;
    const config = resolveConfig({ job: 'dup', stages: 2, microbatches: 2, policy: 'bf', profile: 'uniform' });
    request({ verb: 'host', reply: REPLY, config, stages: [0, 0] });
    await settle();
    assert.equal(replies.at(-1)?.verb, 'error');
    assert.match(String(replies.at(-1)?.message), /stages must not repeat/);
    assert.equal(bus.subscriptionCount, subscriptions, 'no subscription of the refused job is left');
    request({ verb: 'host', reply: REPLY, config, stages: [0, 1] });
    await settle();
    assert.equal(replies.at(-1)?.verb, 'hosting', JSON.stringify(replies.at(-1)));
    // Four inboxes per stage, and the answer to claims of the job's name.
    assert.equal(bus.subscriptionCount, subscriptions + 2 * 4 + 1);
    request({ verb: 'abort', reply: REPLY, job: 'dup' });
    await settle();
    assert.equal(bus.subscriptionCount, subscriptions);
  });

  it("answers claims of a job name while it hosts the job's stages, so a new run cannot share them", async () => {
    const { bus, logs, replies, request } = agentOnLocalBus();
    const config = resolveConfig({ job: 'orphan', stages: 2, microbatches: 2, policy: 'bf', profile: 'uniform' });
    request({ verb: 'host', reply: REPLY, config, stages: [0, 1], leaseMs: MIN_LEASE_MS });
    await until(() => replies.some((r) => r.verb === 'hosting'), 5000);
    await assert.rejects(
      claimJob(bus, 'orphan', 20),
      (e: Error) =>
        e instanceof JobNameTakenError &&
        new RegExp(
          `job orphan's stages are still hosted by node agent n1 \\(pid ${process.pid} on .*\\), left by a launcher that stopped without finishing; they are dropped once their launcher has not renewed them for ${MIN_LEASE_MS} ms`,
        ).test(e.message),
      'refused while hosted',
    );
    request({ verb: 'abort', reply: REPLY, job: 'orphan' });
    await until(() => replies.some((r) => r.verb === 'aborted'), 5000);
    assert.ok(
      logs.some((l) => /^node n1: job orphan aborted; its stages are stopped$/.test(l)),
      logs.join('\n'),
    );
    const release = await claimJob(bus, 'orphan', 20);
    release();
  });

  it('answers nothing on a reply subject over 128 characters (the server would drop its connection for one of 4 KB)', async () => {
    const { bus, agent, logs, request } = agentOnLocalBus();
    const reply = `${NODES_PREFIX}.reply.${'x'.repeat(5000)}`;
    let answered = 0;
    // Watched with a wildcard: the bus itself refuses a subject this long (MAX_SUBJECT_BYTES).
    bus.subscribe(`${NODES_PREFIX}.reply.>`, () => answered++);
    request({ verb: 'abort', reply, job: 'none' });
    await settle();
    assert.equal(answered, 0);
    assert.ok(agent.rejected >= 1 && logs.some((l) => /cannot answer on/.test(l)), logs.join('\n'));
  });

  it("sends a small error when an answer is over the server's max_payload, so the launcher knows it lives", async () => {
    // The in-process bus with the limit a nats-server enforces, on the answers.
    class LimitedBus extends LocalBus {
      override publish(subject: string, data: Uint8Array): void {
        if (subject === REPLY && data.byteLength > 200) throw new PayloadTooLargeError(subject, data.byteLength, 200);
        super.publish(subject, data);
      }
    }
    const bus = new LimitedBus();
    const replies: Record<string, unknown>[] = [];
    bus.subscribe(REPLY, (_s, d) => replies.push(decodeValue(d) as Record<string, unknown>));
    const agent = newNodeAgent({ name: 'n1', bus, log: () => {} });
    agent.start();
    const config = resolveConfig({ job: 'big', stages: 2, microbatches: 2, policy: 'bf', profile: 'uniform' });
    bus.publish(nodeSubject('n1'), encodeValue({ verb: 'host', reply: REPLY, config, stages: [0, 1] }));
    await settle();
    assert.equal(replies.at(-1)?.verb, 'hosting');
    bus.publish(nodeSubject('n1'), encodeValue({ verb: 'status', reply: REPLY, job: 'big' }));
    await until(() => replies.length === 2, 5000);
    assert.equal(replies[1].verb, 'error');
    assert.match(String(replies[1].message), /the "status" answer is \d+ bytes, over the server's max_payload of 200/);
    bus.publish(nodeSubject('n1'), encodeValue({ verb: 'abort', reply: REPLY, job: 'big' }));
    await settle();
  });

  it('survives requests whose fields cannot even be printed, and keeps serving', async () => {
    const { agent, replies, hellos, request } = agentOnLocalBus();
    request({ verb: { toString: 1 }, reply: REPLY });
    request({ verb: 'status', reply: REPLY, job: { toString: 1, valueOf: 2 } });
    request({ verb: 'x'.repeat(100_000), reply: REPLY });
    await settle();
    assert.equal(agent.rejected, 3);
    assert.equal(replies.length, 3);
    assert.ok(
      replies.every((r) => r.verb === 'error' && String(r.message).length < 400),
      JSON.stringify(replies).slice(0, 500),
    );
    assert.match(String(replies[1].message), /job must be a string/);
    const before = hellos.length;
    request({ verb: 'ping' });
    await settle();
    assert.equal(hellos.length, before + 1);
  });

  it('hosts nothing for a request it could not answer, or whose job name is not a string', async () => {
    const { bus, agent, replies, request } = agentOnLocalBus();
    const subscriptions = bus.subscriptionCount;
    const config = resolveConfig({ job: 'quiet', stages: 2, microbatches: 2, policy: 'bf', profile: 'uniform' });
    request({ verb: 'host', reply: `${NODES_PREFIX}.reply.a b`, config, stages: [0] });
    request({ verb: 'host', config, stages: [0] });
    request({ verb: 'host', reply: REPLY, config: { ...config, job: 5 }, stages: [0] });
    await settle();
    assert.equal(bus.subscriptionCount, subscriptions, 'nothing was hosted');
    assert.ok(agent.rejected >= 3, `rejected ${agent.rejected}`);
    assert.match(String(replies.at(-1)?.message), /job name 5 must be a string/);
  });

  it('refuses a second host request for a job whose backend is still loading', async () => {
    const { bus, replies, request } = agentOnLocalBus();
    const subscriptions = bus.subscriptionCount;
    const train = TINY_MLP_TRAIN;
    const config = resolveConfig({ job: 'twice', stages: 2, microbatches: 2, policy: 'bf', profile: 'train', train });
    request({ verb: 'host', reply: REPLY, config, stages: [0] });
    request({ verb: 'host', reply: REPLY, config, stages: [1] });
    await until(() => replies.length === 2, 60_000);
    assert.deepEqual(replies.map((r) => r.verb).sort(), ['error', 'hosting']);
    assert.match(String(replies.find((r) => r.verb === 'error')?.message), /already hosted/);
    request({ verb: 'abort', reply: REPLY, job: 'twice' });
    await settle();
    assert.equal(bus.subscriptionCount, subscriptions, 'nothing of the job is left');
  });

  it('refuses a config that is not a map of JobConfig fields of their types, naming the field, and hosts nothing', async () => {
    const { bus, replies, request } = agentOnLocalBus();
    const subscriptions = bus.subscriptionCount;
    const good = resolveConfig({ job: 'shape', stages: 2, microbatches: 2, policy: 'bf', profile: 'uniform' });
    const cases: [unknown, RegExp][] = [
      [[1, 2], /config must be a map of JobConfig fields, got \[1,2\]/],
      [undefined, /config must be a map of JobConfig fields, got undefined/],
      [{ ...good, mode: 'weird' }, /config\.mode must be one of sync, async, got "weird"/],
      [{ ...good, policy: {} }, /config\.policy must be a string, got \{\}/],
      [{ ...good, profile: 123 }, /config\.profile must be a string, got 123/],
      [{ ...good, mode: 'async', async: null }, /config\.async must be a map, got null/],
      [{ ...good, jitter: 'huge' }, /config\.jitter must be one of none, compute, paper, got "huge"/],
      [{ ...good, stages: '2' }, /config\.stages must be an integer >= 1, got "2"/],
      [{ ...good, bufferLimit: 'deep' }, /config\.bufferLimit must be an integer >= 1 or "depth", got "deep"/],
      [
        { ...good, stallTimeoutMs: 2 ** 31 },
        /config\.stallTimeoutMs must be a number of ms from 1 to 2147483647, got 2147483648/,
      ],
      [{ ...good, extra: 1 }, /config: unknown field "extra"/],
      [{ ...good, async: { ...good.async, lr: 'fast' } }, /config\.async\.lr must be a finite number, got "fast"/],
      [{ ...good, train: { model: 'mlp' } }, /config\.train\.data is missing/],
      [
        { ...good, train: { ...TRAIN_DEFAULTS, model: 'rnn' } },
        /config\.train\.model must be one of gpt, mlp, got "rnn"/,
      ],
      [{ ...good, train: 5 }, /config\.train must be a map or null, got 5/],
    ];
    for (const [config] of cases) request({ verb: 'host', reply: REPLY, config, stages: [0] });
    await settle();
    assert.equal(replies.length, cases.length);
    replies.forEach((r, i) => {
      assert.equal(r.error, 'JobConfigError', JSON.stringify(r));
      assert.match(String(r.message), cases[i][1]);
    });
    assert.equal(bus.subscriptionCount, subscriptions, 'nothing was hosted');
    request({ verb: 'host', reply: REPLY, config: good, stages: [0] });
    await settle();
    assert.equal(replies.at(-1)?.verb, 'hosting', 'a config of the right shape is hosted');
    request({ verb: 'abort', reply: REPLY, job: 'shape' });
    await settle();
  });

  it('refuses to host a job aborted while its backend was loading, and leaves nothing of it', async () => {
    const { bus, logs, replies, request } = agentOnLocalBus();
    const subscriptions = bus.subscriptionCount;
    const train = TINY_MLP_TRAIN;
    const config = resolveConfig({ job: 'cut', stages: 2, microbatches: 2, policy: 'bf', profile: 'train', train });
    request({ verb: 'host', reply: REPLY, config, stages: [0, 1], launch: 'l1' });
    request({ verb: 'abort', reply: REPLY, job: 'cut', launch: 'l1' });
    await until(() => replies.length === 2, 60_000);
    assert.deepEqual(
      replies.map((r) => r.verb),
      ['aborted', 'error'],
    );
    assert.match(String(replies[1].message), /job cut is not hosted: aborted while it was starting/);
    assert.ok(
      logs.some((l) => /host failed: job cut is not hosted/.test(l)),
      logs.join('\n'),
    );
    assert.ok(
      logs.some((l) => /job cut aborted while it was starting; it will not be hosted/.test(l)),
      logs.join('\n'),
    );
    assert.equal(bus.subscriptionCount, subscriptions, 'nothing of the job is left');
  });

  it('drops a job whose launcher stops renewing its lease, and keeps one that is renewed', async () => {
    const { bus, logs, replies, request } = agentOnLocalBus();
    const subscriptions = bus.subscriptionCount;
    const config = (job: string) =>
      resolveConfig({ job, stages: 2, microbatches: 2, policy: 'bf', profile: 'uniform' });
    request({ verb: 'host', reply: REPLY, config: config('kept'), stages: [0], leaseMs: MIN_LEASE_MS });
    request({ verb: 'host', reply: REPLY, config: config('dropped'), stages: [0], leaseMs: MIN_LEASE_MS });
    await settle();
    assert.deepEqual(
      replies.map((r) => r.verb),
      ['hosting', 'hosting'],
    );
    // Per job: the stage's four inboxes and the answer to claims of its name.
    assert.equal(bus.subscriptionCount, subscriptions + 2 * 5);
    const renew = setInterval(() => request({ verb: 'renew', job: 'kept' }), MIN_LEASE_MS / 4);
    try {
      await until(() => bus.subscriptionCount === subscriptions + 5, 3 * MIN_LEASE_MS);
      await new Promise((r) => setTimeout(r, MIN_LEASE_MS));
      assert.equal(bus.subscriptionCount, subscriptions + 5, 'the renewed job is still hosted');
    } finally {
      clearInterval(renew);
    }
    assert.ok(
      logs.some((l) => /job dropped: nothing from its launcher for 1000 ms \(lease expired\)/.test(l)),
      logs.join('\n'),
    );
    request({ verb: 'host', reply: REPLY, config: config('dropped'), stages: [0] });
    await settle();
    assert.equal(replies.at(-1)?.verb, 'hosting', 'the name of a dropped job can be hosted again');
    request({ verb: 'host', reply: REPLY, config: config('x'), stages: [0], leaseMs: 10 });
    await settle();
    assert.match(String(replies.at(-1)?.message), /leaseMs must be an integer from 1000 to 2147483647, got 10/);
    // Node fires a timer of 2^31 ms or more after 1 ms: such a lease would end at once, over and over.
    request({ verb: 'host', reply: REPLY, config: config('x'), stages: [0], leaseMs: 2 ** 31 });
    await settle();
    assert.match(String(replies.at(-1)?.message), /leaseMs must be an integer from 1000 to 2147483647, got 2147483648/);
    request({ verb: 'host', reply: REPLY, config: config('x'), stages: [0], launch: 'a.b' });
    await settle();
    assert.match(String(replies.at(-1)?.message), /launch must be a string of 1 to 64 of \[0-9A-Za-z_-\], got "a\.b"/);
    for (const job of ['kept', 'dropped']) request({ verb: 'abort', reply: REPLY, job });
    await settle();
    assert.equal(bus.subscriptionCount, subscriptions);
  });
});

describe('an exit request', () => {
  it('stops the agent only after it has told the launchers of its jobs, and logs it', async () => {
    const { agent, logs, replies, request } = agentOnLocalBus();
    const config = resolveConfig({ job: 'left', stages: 2, microbatches: 2, policy: 'bf', profile: 'uniform' });
    request({ verb: 'host', reply: REPLY, config, stages: [0, 1] });
    await until(() => replies.some((r) => r.verb === 'hosting'), 5000);
    request({ verb: 'exit' });
    await agent.exited;
    assert.deepEqual(
      replies.filter((r) => r.verb === 'leaving'),
      [{ verb: 'leaving', job: 'left', reason: 'a peer asked it to exit', name: 'n1' }],
    );
    assert.ok(
      logs.some((l) => /a peer asked this agent to exit/.test(l)),
      logs.join('\n'),
    );
  });
});

describe("a host request naming a file on the agent's machine", () => {
  const uniformFile = path.join(__dirname, '..', '..', 'models', 'profiles', 'uniform.json');

  it('is refused, naming the file and --allow-files, by an agent started without any', async () => {
    const { bus, replies, request } = agentOnLocalBus();
    const subscriptions = bus.subscriptionCount;
    const config = (policy: string, profile: string) =>
      resolveConfig({ job: 'files', stages: 2, microbatches: 2, policy, profile });
    request({ verb: 'host', reply: REPLY, config: config('./evil.js', 'uniform'), stages: [0] });
    request({ verb: 'host', reply: REPLY, config: config('bf', '/etc/passwd'), stages: [0] });
    request({ verb: 'host', reply: REPLY, config: config('/tmp/x/p', uniformFile), stages: [0] });
    await settle();
    assert.deepEqual(
      replies.map((r) => [r.verb, r.error]),
      Array(3).fill(['error', 'FilesNotAllowedError']),
    );
    assert.match(
      String(replies[0].message),
      /the job names policy module "\.\/evil\.js"; this agent uses only the files and directories of its baton node --allow-files \(none given\)/,
    );
    assert.match(String(replies[1].message), /the job names profile file "\/etc\/passwd"; this agent/);
    assert.match(String(replies[2].message), /policy module "\/tmp\/x\/p" and profile file ".*uniform\.json"/);
    // A training job's corpus is read on the agent's machine too, and so is its checkpoint when it resumes.
    const train = {
      ...TRAIN_DEFAULTS,
      model: 'mlp' as const,
      data: '/etc/shadow',
      checkpoint: '/root/ck',
      startIteration: 2,
      totalIterations: 4,
    };
    request({
      verb: 'host',
      reply: REPLY,
      config: resolveConfig({ job: 'files-t', stages: 2, microbatches: 2, train }),
      stages: [0],
    });
    await settle();
    assert.deepEqual([replies[3].verb, replies[3].error], ['error', 'FilesNotAllowedError']);
    assert.match(
      String(replies[3].message),
      /the job names corpus file "\/etc\/shadow" and checkpoint directory "\/root\/ck"; this agent/,
    );
    assert.equal(bus.subscriptionCount, subscriptions, 'nothing was hosted');
  });

  it('is refused when its model is too large to build, before any tensor is made', async () => {
    const { replies, request } = agentOnLocalBus();
    const train = { ...TRAIN_DEFAULTS, model: 'gpt' as const, width: 30000, heads: 1 };
    request({
      verb: 'host',
      reply: REPLY,
      config: resolveConfig({ job: 'huge', stages: 2, microbatches: 2, profile: 'train', train }),
      stages: [0],
    });
    await until(() => replies.length > 0, 20000);
    assert.deepEqual([replies[0].verb, replies[0].error], ['error', 'ModelConfigError']);
    assert.match(
      String(replies[0].message),
      /gpt config: \d+ parameters \(--layers \d+, --width 30000\), over the limit of 268435456/,
    );
  });

  it('is refused when the file lies outside every path of --allow-files, through .. or a link too', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'baton-allow-'));
    mkdirSync(path.join(dir, 'ok'));
    writeFileSync(path.join(dir, 'ok', 'p.json'), '{}');
    writeFileSync(path.join(dir, 'stranger.js'), 'throw new Error("stranger code ran")');
    symlinkSync(path.join(dir, 'stranger.js'), path.join(dir, 'ok', 'link.js'));
    const bus = new LocalBus();
    const replies: Record<string, unknown>[] = [];
    bus.subscribe(REPLY, (_s, d) => replies.push(decodeValue(d) as Record<string, unknown>));
    newNodeAgent({ name: 'n1', bus, log: () => {}, allowedFiles: [realPath(path.join(dir, 'ok'))] }).start();
    for (const policy of [
      path.join(dir, 'stranger.js'),
      path.join(dir, 'ok', '..', 'stranger.js'),
      path.join(dir, 'ok', 'link.js'),
    ]) {
      const config = resolveConfig({ job: 'files', stages: 2, microbatches: 2, policy, profile: 'uniform' });
      bus.publish(nodeSubject('n1'), encodeValue({ verb: 'host', reply: REPLY, config, stages: [0, 1] }));
    }
    await settle();
    assert.deepEqual(
      replies.map((r) => r.error),
      Array(3).fill('FilesNotAllowedError'),
    );
    assert.match(
      String(replies[0].message),
      /uses only the files and directories of its baton node --allow-files \(".*ok"\)/,
    );
  });

  it('is hosted by an agent whose --allow-files holds the file', async () => {
    const bus = new LocalBus();
    const replies: Record<string, unknown>[] = [];
    bus.subscribe(REPLY, (_s, d) => replies.push(decodeValue(d) as Record<string, unknown>));
    newNodeAgent({ name: 'n1', bus, log: () => {}, allowedFiles: [realPath(path.dirname(uniformFile))] }).start();
    const config = resolveConfig({ job: 'files', stages: 2, microbatches: 2, policy: 'bf', profile: uniformFile });
    bus.publish(nodeSubject('n1'), encodeValue({ verb: 'host', reply: REPLY, config, stages: [0, 1] }));
    await settle();
    assert.equal(replies.at(-1)?.verb, 'hosting', JSON.stringify(replies.at(-1)));
    bus.publish(nodeSubject('n1'), encodeValue({ verb: 'abort', reply: REPLY, job: 'files' }));
    await settle();
  });
});

describe('job requests of another launch', () => {
  it('are refused with an error naming both launches, and leave the hosted job alone', async () => {
    const { bus, logs, replies, request } = agentOnLocalBus();
    const subscriptions = bus.subscriptionCount;
    const config = resolveConfig({ job: 'again', stages: 2, microbatches: 2, policy: 'bf', profile: 'uniform' });
    request({ verb: 'host', reply: REPLY, config, stages: [0, 1], leaseMs: MIN_LEASE_MS, launch: 'new' });
    await until(() => replies.some((r) => r.verb === 'hosting'), 5000);
    for (const verb of ['abort', 'finish', 'status', 'renew'])
      request({ verb, reply: REPLY, job: 'again', launch: 'old' });
    request({ verb: 'abort', reply: REPLY, job: 'again' });
    await settle();
    const refused = replies.filter((r) => r.verb === 'error');
    assert.deepEqual(
      refused.map((r) => r.request),
      ['abort', 'finish', 'status', 'renew', 'abort'],
    );
    for (const r of refused.slice(0, 4))
      assert.match(
        String(r.message),
        /LaunchMismatchError: job again is hosted here for launch new, not for launch "old"; \w+ refused/,
      );
    assert.match(String(refused[4].message), /not for launch undefined; abort refused/);
    assert.ok(
      logs.some((l) => /abort failed: job again is hosted here for launch new/.test(l)),
      logs.join('\n'),
    );
    assert.equal(bus.subscriptionCount, subscriptions + 2 * 4 + 1, 'the job is still hosted');
    // Requests of another launch do not keep the job's lease alive either.
    const renew = setInterval(() => request({ verb: 'renew', job: 'again', launch: 'old' }), MIN_LEASE_MS / 4);
    try {
      await until(() => bus.subscriptionCount === subscriptions, 3 * MIN_LEASE_MS);
    } finally {
      clearInterval(renew);
    }
  });

  it('do not come from a launcher: it sends its launch with every request, so its job runs to the end', async () => {
    const bus = new LocalBus();
    const logs: string[] = [];
    const agent = newNodeAgent({ name: 'n1', bus, log: (l) => logs.push(l) });
    agent.start();
    const cfg = resolveConfig({ job: 'ownlaunch', stages: 2, microbatches: 2, policy: 'bf', profile: 'uniform' });
    try {
      const result = await runDistributed(cfg, { bus, nodes: ['n1'], settleMs: 0 });
      assert.deepEqual(
        result.nodes.map((n) => n.name),
        ['n1'],
      );
      assert.ok(
        logs.some((l) => /^node n1: job ownlaunch finished; its stages are stopped$/.test(l)),
        logs.join('\n'),
      );
    } finally {
      await bus.close();
    }
  });
});

describe('a launcher that hears stray messages on its trace subjects', () => {
  it('tallies refusals: every one counted, only the first MAX_REJECTS_DESCRIBED kept', () => {
    const t = newRejectTally();
    for (let i = 0; i < 1000; i++) tallyReject(t, `junk ${i}`);
    assert.equal(t.count, 1000);
    assert.equal(t.first.length, MAX_REJECTS_DESCRIBED);
    assert.equal(t.first[0], 'junk 0');
  });

  /** A 2-stage job on one agent over the in-process bus, with `stray` published on its trace subjects meanwhile. */
  async function runWithStrays(job: string, stray: (bus: LocalBus) => void) {
    const bus = new LocalBus();
    const result = await runOnAgentN1(
      bus,
      resolveConfig({ job, stages: 2, microbatches: 2, policy: 'bf', profile: 'uniform' }),
      {},
      () => stray(bus),
    );
    return { result, launcher: result.rejects.filter((r) => r.startsWith('launcher: ')) };
  }

  it('counts and names them as rejected, and completes: only a malformed batch of its own launch fails it', async () => {
    const { result, launcher } = await runWithStrays('stray', (bus) => {
      // Any peer can publish there: bytes that are no CBOR, a list, a map without a launch.
      bus.publish('baton.stray.trace.0', new Uint8Array([0xff, 0x00]));
      bus.publish('baton.stray.trace.1', encodeValue([1, 2]));
      bus.publish('baton.stray.trace.0', encodeValue({ events: [1] }));
    });
    assert.equal(launcher.length, 3, result.rejects.join('\n'));
    assert.match(launcher[0], /"baton\.stray\.trace\.0": not a trace batch: decodeValue: malformed CBOR/);
    assert.match(
      launcher[1],
      /"baton\.stray\.trace\.1": not a trace batch \(a map with this run's launch id\), got \[1,2\]/,
    );
    assert.match(launcher[2], /trace batch of launch undefined/);
    assert.ok(result.totals.rejected >= 3);
  });

  it('keeps a flood of them counted but only the first few described (its memory does not grow with the flood)', async () => {
    const junk = new Uint8Array([0xff, 0x00]);
    const { result, launcher } = await runWithStrays('flood', (bus) => {
      for (let i = 0; i < 5000; i++) bus.publish('baton.flood.trace.0', junk);
    });
    assert.ok(launcher.length >= 1 && launcher.length <= MAX_REJECTS_DESCRIBED, `${launcher.length} described`);
    assert.ok(result.totals.rejected >= 5000, `rejected ${result.totals.rejected}`);
  });
});

/**
 * An in-process bus on which node n1's finish requests are answered first with `answers`, as a
 * node could answer; the request then goes on to the agent, unless `withhold` keeps it back.
 */
function finishAnsweredBus(answers: Record<string, unknown>[], withhold = false): LocalBus {
  return new (class extends LocalBus {
    override publish(subject: string, data: Uint8Array): void {
      const req = subject === nodeSubject('n1') ? (decodeValue(data) as Record<string, unknown>) : null;
      if (req?.verb === 'finish') {
        for (const answer of answers) super.publish(String(req.reply), encodeValue(answer));
        if (withhold) return;
      }
      super.publish(subject, data);
    }
  })();
}

describe('a launcher whose node answers finish with an error', () => {
  it('fails at once, naming the node and its message, instead of waiting out the node timeout', async () => {
    // The agent's answer to finish replaced by an error, as an agent whose job went away sends.
    const finishRefused = finishAnsweredBus(
      [{ verb: 'error', name: 'n1', request: 'finish', message: 'Error: the dog ate it' }],
      true,
    );
    const cfg = resolveConfig({ job: 'unfinished', stages: 2, microbatches: 2, policy: 'bf', profile: 'uniform' });
    const started = Date.now();
    await assert.rejects(
      runOnAgentN1(finishRefused, cfg, { nodeTimeoutMs: 20000 }),
      (e: Error) =>
        e.name === 'JobError' && /^node n1 could not finish job unfinished: Error: the dog ate it$/.test(e.message),
    );
    assert.ok(Date.now() - started < 5000, `took ${Date.now() - started} ms`);
  });
});

describe('a launcher that hears malformed answers to finish and status', () => {
  it("refuses them, counted, and completes with the node's own answer instead of failing with a TypeError", async () => {
    // A malformed finished answer ahead of the agent's: no events, a number for failures, a string for lostTrace.
    const malformed = [
      {},
      { events: 5 },
      { events: { 0: 'a' } },
      { events: {}, failures: 7 },
      { events: {}, lostTrace: 'x' },
    ].map((bad) => ({ verb: 'finished', name: 'n1', ...bad }));
    const result = await runOnAgentN1(
      finishAnsweredBus(malformed),
      resolveConfig({ job: 'badfinish', stages: 2, microbatches: 2, policy: 'bf', profile: 'uniform' }),
    );
    const refused = result.rejects.filter((r) => / a finished reply from node n1 refused: /.test(r));
    assert.equal(refused.length, 5, result.rejects.join('\n'));
    assert.match(refused[0], /its events must be a map of stage to count, got undefined$/);
    assert.match(refused[3], /its failures must be a list of strings, got 7$/);
    assert.ok(result.totals.rejected >= 5);
  });

  it('reads a well-formed finished answer with more failures than a call takes arguments, and fails the job with them', async () => {
    const manyFailures = {
      verb: 'finished',
      name: 'n1',
      events: {},
      failures: new Array(300_000).fill('boom'),
      lostTrace: new Array(300_000).fill('gone'),
    };
    await assert.rejects(
      runOnAgentN1(
        finishAnsweredBus([manyFailures]),
        resolveConfig({ job: 'manyfailures', stages: 2, microbatches: 2, policy: 'bf', profile: 'uniform' }),
      ),
      (e: Error) =>
        e.name === 'JobError' && /^actor failures on the nodes: boom; boom; boom; boom; boom$/.test(e.message),
    );
  });

  it('refuses a status answer whose statuses the deadlock report could not read', () => {
    const status = idleStatus({
      stage: 0,
      remaining: 2,
      inflight: 1,
      forwardReady: ['F1'],
      waitingFor: ['B0 (gradient)'],
      idleSince: 3.5,
    });
    assert.equal(replyProblem({ verb: 'status', name: 'n1', statuses: [status] }), null);
    assert.equal(
      replyProblem({
        verb: 'status',
        name: 'n1',
        statuses: [{ ...status, held: undefined, heldIteration: undefined }],
      }),
      null,
    );
    assert.match(replyProblem({ verb: 'status', name: 'n1', statuses: 5 }) ?? '', /statuses must be a list, got 5/);
    assert.match(
      replyProblem({ verb: 'status', name: 'n1', statuses: [null] }) ?? '',
      /a stage status must be a map, got null/,
    );
    assert.match(
      replyProblem({ verb: 'status', name: 'n1', statuses: [{ ...status, forwardReady: 'F1' }] }) ?? '',
      /forwardReady is "F1"/,
    );
  });
});

describe("a launcher given a stall timeout beyond Node's longest timer", () => {
  it('refuses the job before it asks any node, rather than renew every millisecond', async () => {
    const bus = new LocalBus();
    let asked = 0;
    bus.subscribe(nodeSubject('n1'), () => asked++);
    const cfg = resolveConfig({ job: 'forever', stages: 2, microbatches: 2, stallTimeoutMs: 2 ** 31 });
    try {
      await assert.rejects(
        runDistributed(cfg, { bus, nodes: ['n1'] }),
        (e: Error) =>
          e.name === 'JobConfigError' &&
          /the lease \(by default the stall timeout\) is 2147483648 ms; it must be at most 2147483647 ms/.test(
            e.message,
          ),
      );
      assert.equal(asked, 0);
    } finally {
      await bus.close();
    }
  });
});

describe('a job its node no longer hosts', () => {
  it("is named in the agent's error answer to renew and status", async () => {
    const { replies, request } = agentOnLocalBus();
    request({ verb: 'renew', reply: REPLY, job: 'gone' });
    request({ verb: 'status', reply: REPLY, job: 'gone' });
    await settle();
    assert.deepEqual(
      replies.map((r) => [r.verb, r.request, r.error]),
      [
        ['error', 'renew', 'JobNotHostedError'],
        ['error', 'status', 'JobNotHostedError'],
      ],
    );
    for (const r of replies)
      assert.match(String(r.message), /^JobNotHostedError: job gone is not hosted here \(never, or no longer/);
  });

  it('fails its launcher at once, naming the node, instead of after a lease', async () => {
    const bus = new LocalBus();
    // The agent drops the job soon after hosting it, as one that restarted would have.
    bus.subscribe(nodeSubject('n1'), (_s, d) => {
      const req = decodeValue(d) as Record<string, unknown>;
      if (req.verb === 'host')
        setTimeout(
          () => bus.publish(nodeSubject('n1'), encodeValue({ verb: 'abort', job: 'dropped', launch: req.launch })),
          100,
        );
    });
    const cfg = bfUniform('dropped', 2, 8, { iterations: 100 });
    const started = Date.now();
    await assert.rejects(
      runOnAgentN1(bus, cfg, { leaseMs: 4000 }),
      (e: Error) =>
        e.name === 'JobError' &&
        /^node n1 no longer hosts job dropped: JobNotHostedError: job dropped is not hosted here/.test(e.message),
    );
    assert.ok(Date.now() - started < 3000, `took ${Date.now() - started} ms`);
  });
});

describe("a node's refusal of the job's input", () => {
  it('fails the launcher with a NodeInputError naming the node, which baton exits 2 for, as for the same error here', async () => {
    // The profile is only checked on the nodes (with --nodes it may exist only there).
    const cfg = bfUniform('badinput', 2, 2, { profile: 'no-such-profile' });
    await assert.rejects(
      runOnAgentN1(new LocalBus(), cfg),
      (e: Error) =>
        e.name === 'NodeInputError' &&
        /^node n1 refused to host: ProfileError: unknown profile "no-such-profile"/.test(e.message) &&
        exitCodeFor(e) === 2,
    );
  });
});

describe("the processes of a job's nodes", () => {
  it('are told apart by machine and pid, so two agents on two machines with one pid count twice', async () => {
    const bus = new LocalBus();
    // In one test process both agents have its pid; they report two machines.
    for (const [name, host] of [
      ['n1', 'machine-a'],
      ['n2', 'machine-b'],
    ])
      newNodeAgent({ name, bus, log: () => {}, host }).start();
    const cfg = resolveConfig({ job: 'twohosts', stages: 2, microbatches: 2, policy: 'bf', profile: 'uniform' });
    try {
      const result = await runDistributed(cfg, { bus, nodes: ['n1', 'n2'], settleMs: 0 });
      assert.deepEqual(
        result.nodes.map((n) => [n.name, n.host, n.pid]),
        [
          ['n1', 'machine-a', process.pid],
          ['n2', 'machine-b', process.pid],
        ],
      );
      assert.deepEqual(distinctProcesses(result.nodes), [
        { pid: process.pid, host: 'machine-a' },
        { pid: process.pid, host: 'machine-b' },
      ]);
      assert.equal(distinctProcesses([...result.nodes, ...result.nodes]).length, 2);
    } finally {
      await bus.close();
    }
  });
});

describe('a launcher and an agent that does not take the launch id', () => {
  it('fails at once, naming the agent, instead of stalling on reports it refuses', async () => {
    const bus = new LocalBus();
    // An agent from before launch ids: it hosts, and answers without the id.
    bus.subscribe(nodeSubject('old1'), (_s, d) => {
      const req = decodeValue(d) as Record<string, unknown>;
      if (req.verb === 'ping') bus.publish(ANNOUNCE_SUBJECT, encodeValue({ verb: 'hello', name: 'old1', pid: 1 }));
      if (req.verb === 'host')
        bus.publish(
          String(req.reply),
          encodeValue({ verb: 'hosting', name: 'old1', pid: 1, stages: req.stages, job: 'oldagent' }),
        );
    });
    const cfg = resolveConfig({ job: 'oldagent', stages: 2, microbatches: 2, policy: 'bf', profile: 'uniform' });
    try {
      await assert.rejects(
        runDistributed(cfg, { bus, nodes: ['old1'], settleMs: 0 }),
        (e: Error) =>
          e.name === 'JobError' &&
          /node\(s\) old1 hosted the job without taking its launch id: an agent older than this launcher\?/.test(
            e.message,
          ),
      );
    } finally {
      await bus.close();
    }
  });
});
