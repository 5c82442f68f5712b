import { strict as assert } from 'assert';
import { ChildProcess, spawn } from 'child_process';
import * as path from 'path';
import { connect, NatsConnection } from '@nats-io/transport-node';
import { natsServerForSuite } from './nats-server-fixture';
import { testKeyFile } from './helpers-auth';
import { batonInProcess } from './helpers-cli';
import {
  CAPABILITY_LIMITS,
  INFO_RESPONSE_TYPE,
  NODE_SERVICE_NAME,
  NodeCapabilities,
  capabilitiesMetadata,
  parseNodeInfo,
} from '../actors/node-capabilities';
import { RequireError, nodesMeeting, parseRequirements, pickNodes, unmet } from '../job/node-require';

const CLI = path.join(__dirname, '..', 'cli', 'main.js');

const CAPS: NodeCapabilities = {
  node: 'n1',
  host: 'box',
  pid: 1234,
  backend: 'wasm',
  backends_tried: ['tfjs-node-gpu:failed', 'tfjs-node:failed', 'wasm:ok'],
  gflops_matmul: 3.5,
  gflops_stage: 2.25,
  measured_at: '2026-12-02T04:00:00.000Z',
  cores: 2,
  memory_bytes: 8 * 2 ** 30,
  free_heap_bytes: 2 ** 31,
  version: '0.1.0',
  tags: { gpu: 'h200', rack: 'a' },
};

/** An INFO answer as a baton-node service sends it, with its metadata changed by `meta`. */
function info(meta: Record<string, unknown> = {}, top: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    type: INFO_RESPONSE_TYPE,
    name: NODE_SERVICE_NAME,
    id: 'ID1',
    version: '0.1.0',
    description: 'x',
    endpoints: [],
    metadata: { ...capabilitiesMetadata(CAPS), ...meta },
    ...top,
  };
}

describe('node capabilities as service INFO metadata', () => {
  it('round-trip through the metadata strings and the schema', () => {
    const r = parseNodeInfo(info());
    assert.ok(r.ok, JSON.stringify(r));
    assert.deepEqual(r.capabilities, CAPS);
    assert.equal(r.id, 'ID1');
  });

  const nonsense: [string, Record<string, unknown>, Record<string, unknown>, RegExp][] = [
    ['a negative speed', { gflops_stage: '-5' }, {}, /gflops_stage/],
    ['a speed of 1e300', { gflops_matmul: '1e300' }, {}, /gflops_matmul must be above 0 and at most 1000000/],
    ['a zero speed', { gflops_stage: '0' }, {}, /gflops_stage/],
    ['a speed as a JSON number (metadata values are strings)', { gflops_stage: 12 }, {}, /metadata\.gflops_stage/],
    ['a speed that is not a number', { gflops_stage: 'fast' }, {}, /gflops_stage must be a non-negative decimal/],
    ['a NaN speed', { gflops_stage: 'NaN' }, {}, /gflops_stage/],
    ['0 cores', { cores: '0' }, {}, /cores must be an integer from 1/],
    ['a fractional core count', { cores: '1.5' }, {}, /cores/],
    ['a huge memory', { memory_bytes: '1e300' }, {}, /memory_bytes/],
    ['a node name with a dot', { node: 'a.b' }, {}, /node must be a node name/],
    ['a tag with a bad key', { 'tag.a b': 'x' }, {}, /tag "a b"/],
    ['a tag with an empty value', { 'tag.gpu': '' }, {}, /tag gpu/],
    ['metadata that is a string', {}, { metadata: 'gpu' }, /info\.metadata/],
    ['another service name', {}, { name: 'other' }, /info\.name/],
    ['another response type', {}, { type: 'io.nats.micro.v1.ping_response' }, /info\.type/],
  ];
  for (const [what, meta, top, reason] of nonsense)
    it(`refuse ${what}, naming the key`, () => {
      const r = parseNodeInfo(info(meta, top));
      assert.ok(!r.ok);
      assert.match(r.reason, reason);
    });

  it('refuse answers that are not maps without throwing', () => {
    for (const x of [null, 42, 'text', [], undefined]) assert.equal(parseNodeInfo(x).ok, false);
  });

  it(`refuse more than ${CAPABILITY_LIMITS.tags} tags`, () => {
    const tags = Object.fromEntries(Array.from({ length: 33 }, (_, k) => [`tag.t${k}`, 'x']));
    const r = parseNodeInfo(info(tags));
    assert.ok(!r.ok && /35 tags, over 32/.test(r.reason));
  });
});

describe('node requirements', () => {
  const node = (name: string, gflops: number, tags: Record<string, string>) => ({
    capabilities: { ...CAPS, node: name, gflops_stage: gflops, tags },
  });
  const nodes = [node('c', 1, { gpu: 'h200' }), node('a', 3, { gpu: 'none' }), node('b', 2, { gpu: 'h200' })];

  it('parse k=v pairs and refuse malformed or repeated keys', () => {
    assert.deepEqual(parseRequirements(['gpu=h200', 'backend=wasm'], 'x'), { gpu: 'h200', backend: 'wasm' });
    assert.throws(() => parseRequirements(['gpu'], 'x'), RequireError);
    assert.throws(() => parseRequirements(['=v'], 'x'), RequireError);
    assert.throws(() => parseRequirements(['a=1', 'a=2'], 'x'), /gives a twice/);
  });

  it('match tags and the backend, and say what a node lacks', () => {
    assert.deepEqual(unmet(nodes[0].capabilities, { gpu: 'h200', backend: 'wasm' }), []);
    assert.deepEqual(unmet(nodes[1].capabilities, { gpu: 'h200', rack: 'b' }), [
      'gpu=h200 (has none)',
      'rack=b (has none)',
    ]);
  });

  it('pick the fastest nodes meeting the requirements, listed by name', () => {
    assert.deepEqual(
      pickNodes(nodes, { gpu: 'h200' }, 4).map((n) => n.capabilities.node),
      ['b', 'c'],
    );
    assert.deepEqual(
      pickNodes(nodes, {}, 2).map((n) => n.capabilities.node),
      ['a', 'b'],
    );
  });

  it('refuse requirements nobody meets, naming what each node has', () => {
    assert.throws(() => nodesMeeting(nodes, { gpu: 'a100' }, 1), /a: gpu=a100 \(has none\); b: gpu=a100 \(has h200\)/);
  });
});

/** A `baton node` agent started by hand (so it registers its service), stdout lines collected. */
function agent(url: string, key: string, name: string, tags: string): { child: ChildProcess; lines: string[] } {
  const child = spawn(
    process.execPath,
    [CLI, 'node', '--nats', url, '--key-file', key, '--name', name, '--tag', tags, '--calibrate-ms', '20', '--json'],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const lines: string[] = [];
  let buf = '';
  child.stdout!.on('data', (d: Buffer) => {
    buf += d.toString();
    const parts = buf.split('\n');
    buf = parts.pop()!;
    lines.push(...parts);
  });
  return { child, lines };
}

async function registered(agents: { lines: string[] }[], ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!agents.every((a) => a.lines.some((l) => l.includes('"registered":true')))) {
    if (Date.now() > deadline)
      throw new Error(`agents not registered after ${ms} ms: ${JSON.stringify(agents.map((a) => a.lines))}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function answers(nc: NatsConnection, subject: string): Promise<Record<string, unknown>[]> {
  const out: Record<string, unknown>[] = [];
  for await (const m of await nc.requestMany(subject, '', { strategy: 'timer', maxWait: 1000 }))
    out.push(m.json<Record<string, unknown>>());
  return out;
}

describe('baton node agents as NATS services, on a real nats-server', function () {
  this.timeout(120_000);
  const server = natsServerForSuite();
  const KEY = testKeyFile();
  const names = ['svc-a', 'svc-b', 'svc-c'];
  let agents: { child: ChildProcess; lines: string[] }[] = [];
  let nc: NatsConnection;

  before(async () => {
    const url = server().url;
    agents = names.map((n, k) => agent(url, KEY.file, n, `rack=r${k},gpu=${k === 1 ? 'h200' : 'none'}`));
    nc = await connect({ servers: url.replace(/^nats:\/\//, '') });
    // Three processes load tfjs and calibrate at once: seconds on a loaded machine.
    await registered(agents, 90_000);
  });
  after(async () => {
    await nc?.close();
    for (const a of agents) a.child.kill('SIGTERM');
    await Promise.all(
      agents.map((a) => (a.child.exitCode === null ? new Promise((r) => a.child.once('exit', r)) : null)),
    );
  });

  /** `baton run` on the discovered agents that meet `requirement`, 2 stages, with the job's node key. */
  const discoverRun = (requirement: string, ...rest: string[]) =>
    batonInProcess(
      'run',
      '--nats',
      server().url,
      '--nodes',
      'discover',
      '--require',
      requirement,
      '--node-key-file',
      KEY.file,
      '--stages',
      '2',
      ...rest,
    );

  it('baton nodes --json lists all three with their measured capabilities and tags', async () => {
    const r = await batonInProcess('nodes', '--nats', server().url, '--json');
    assert.equal(r.code, 0, r.err);
    const out = JSON.parse(r.out) as { nodes: (NodeCapabilities & { hosting: unknown })[]; rejected: number };
    assert.deepEqual(
      out.nodes.map((n) => n.node),
      names,
    );
    for (const [k, n] of out.nodes.entries()) {
      assert.ok(n.gflops_matmul > 0 && n.gflops_stage > 0, JSON.stringify(n));
      assert.ok(n.cores >= 1 && n.memory_bytes > 0 && n.free_heap_bytes > 0);
      assert.ok(n.backends_tried.some((b) => b === `${n.backend}:ok`));
      assert.deepEqual(n.tags, { rack: `r${k}`, gpu: k === 1 ? 'h200' : 'none' });
      assert.deepEqual(n.hosting, []);
    }
    assert.equal(out.rejected, 0);
    const table = await batonInProcess('nodes', '--nats', server().url, '--require', 'gpu=h200');
    assert.match(table.out, /svc-b/);
    assert.doesNotMatch(table.out, /svc-a|svc-c/);
  });

  it('a plain NATS client finds them with $SRV.PING and $SRV.INFO', async () => {
    const pings = await answers(nc, `$SRV.PING.${NODE_SERVICE_NAME}`);
    assert.equal(pings.length, 3);
    for (const p of pings) assert.equal(p.name, NODE_SERVICE_NAME);
    const infos = await answers(nc, '$SRV.INFO');
    const nodes = infos.map((i) => (i.metadata as Record<string, string>).node).sort();
    assert.deepEqual(nodes, names);
    const stats = await answers(nc, `$SRV.STATS.${NODE_SERVICE_NAME}`);
    assert.equal(stats.length, 3);
  });

  it('answers with nonsense capabilities are left out, counted and named; the launcher carries on', async () => {
    const bad: [string, unknown][] = [
      ['negative speed', info({ node: 'liar1', gflops_stage: '-5' }, { id: 'L1' })],
      ['huge speed', info({ node: 'liar2', gflops_matmul: '1e300' }, { id: 'L2' })],
      ['wrong type', info({ node: 'liar3', cores: 4 }, { id: 'L3' })],
      ['not JSON', 'garbage{'],
      // A stranger claiming a real agent's name makes that name ambiguous: it is left out.
      ['a real name', info({ node: 'svc-c' }, { id: 'L5' })],
    ];
    const responders = bad.map(([, body]) =>
      nc.subscribe(`$SRV.INFO.${NODE_SERVICE_NAME}`, {
        callback: (_e, m) => {
          m.respond(typeof body === 'string' ? body : JSON.stringify(body));
        },
      }),
    );
    try {
      await nc.flush();
      const r = await batonInProcess('nodes', '--nats', server().url, '--json');
      assert.equal(r.code, 0, r.err);
      const out = JSON.parse(r.out) as { nodes: { node: string }[]; rejected: number; rejections: string[] };
      assert.deepEqual(
        out.nodes.map((n) => n.node),
        ['svc-a', 'svc-b'],
      );
      assert.equal(out.rejected, 5);
      const why = out.rejections.join('\n');
      for (const re of [/gflops_stage/, /gflops_matmul/, /metadata\.cores/, /not JSON/, /"svc-c" is claimed by 2/])
        assert.match(why, re);
      assert.match(r.err, /refused a baton-node answer/);

      // A discovering launcher in the same company: it uses only the agents that check out and meet --require.
      const run = await discoverRun(
        'gpu=none',
        '--microbatches',
        '4',
        '--iterations',
        '1',
        '--profile',
        'uniform',
        '--job',
        'svc-discover',
        '--json',
      );
      assert.equal(run.code, 0, run.err);
      assert.match(run.err, /using svc-a\n/);
      const result = JSON.parse(run.out) as { makespan_ms: number };
      assert.ok(result.makespan_ms > 0);
    } finally {
      for (const s of responders) s.unsubscribe();
    }
  });

  it('a train on the discovered agents is placed on their measured speeds, with the checksum of a local run', async () => {
    const listed = JSON.parse((await batonInProcess('nodes', '--nats', server().url, '--json')).out) as {
      nodes: NodeCapabilities[];
    };
    const gflops = new Map(listed.nodes.map((n) => [n.node, n.gflops_stage]));
    const small = ['--stages', '2', '--microbatches', '2', '--iterations', '1', '--val-batches', '1', '--json'];
    const run = await batonInProcess(
      'train',
      ...['--transport', 'nats', '--nats', server().url, '--nodes', 'discover', '--require', 'gpu=none'],
      ...['--node-key-file', KEY.file, '--job', 'svc-placed', ...small],
    );
    assert.equal(run.code, 0, run.err);
    const r = JSON.parse(run.out) as { placement: string[]; stage_speeds: number[]; param_checksum: string };
    assert.deepEqual([...r.placement].sort(), ['svc-a', 'svc-c']);
    const fastest = Math.max(gflops.get('svc-a')!, gflops.get('svc-c')!);
    assert.deepEqual(
      r.stage_speeds,
      r.placement.map((n) => Number((gflops.get(n)! / fastest).toPrecision(3))),
    );
    // The last stage (the LM head) is the heavier one under an even split: it goes to the faster agent.
    assert.ok(r.stage_speeds[1] >= r.stage_speeds[0], JSON.stringify(r));
    assert.match(run.err, /placed by the agents' measured speeds: stage 0 on svc-[ac] .*layers split by speed/);
    const local = await batonInProcess('train', '--transport', 'local', ...small);
    assert.equal(local.code, 0, local.err);
    assert.equal(r.param_checksum, (JSON.parse(local.out) as { param_checksum: string }).param_checksum);
  });

  it('a wide train on discovered agents takes one per stage actor and places them by speed, split evenly', async () => {
    const wide = ['--stages', '1', '--tp', '2', '--microbatches', '2', '--iterations', '1', '--val-batches', '1'];
    const run = await batonInProcess(
      'train',
      ...['--transport', 'nats', '--nats', server().url, '--nodes', 'discover', '--require', 'gpu=none'],
      ...['--node-key-file', KEY.file, '--job', 'svc-wide', ...wide, '--json'],
    );
    assert.equal(run.code, 0, run.err);
    const r = JSON.parse(run.out) as { placement: string[]; stage_speeds: null; param_checksum: string };
    assert.deepEqual([...r.placement].sort(), ['svc-a', 'svc-c']);
    assert.equal(r.stage_speeds, null);
    assert.match(
      run.err,
      /stage 0\.r0\.d0 on svc-[ac] .*stage 0\.r1\.d0 on svc-[ac] .*layers split uniformly \(a wide job\)/,
    );
    const local = await batonInProcess('train', '--transport', 'local', ...wide, '--json');
    assert.equal(local.code, 0, local.err);
    assert.equal(r.param_checksum, (JSON.parse(local.out) as { param_checksum: string }).param_checksum);
  });

  it('a launcher whose requirement no node meets is refused with exit 2, naming what each has', async () => {
    const run = await discoverRun('gpu=a100', '--job', 'svc-none');
    assert.equal(run.code, 2);
    assert.match(run.err, /gpu=a100/);
    assert.match(run.err, /svc-b: gpu=a100 \(has h200\)/);
  });

  it('re-measures on SIGUSR2 and re-registers under a new service id, listed once', async () => {
    const a = agents[0];
    const ids = () =>
      a.lines.filter((l) => l.includes('"registered":true')).map((l) => (JSON.parse(l) as { id: string }).id);
    const before = (await batonInProcess('nodes', '--nats', server().url, '--json')).out;
    const first = (JSON.parse(before) as { nodes: { node: string; measured_at: string }[] }).nodes[0];
    a.child.kill('SIGUSR2');
    const deadline = Date.now() + 60_000;
    while (ids().length < 2) {
      assert.ok(Date.now() < deadline, 'no second registration within 60 s');
      await new Promise((r) => setTimeout(r, 50));
    }
    const r = await batonInProcess('nodes', '--nats', server().url, '--json');
    const out = JSON.parse(r.out) as { nodes: { node: string; service_id: string; measured_at: string }[] };
    assert.deepEqual(
      out.nodes.map((n) => n.node),
      names,
    );
    assert.equal(out.nodes[0].service_id, ids()[1]);
    assert.notEqual(ids()[0], ids()[1]);
    assert.ok(out.nodes[0].measured_at > first.measured_at);
  });
});
