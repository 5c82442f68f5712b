// A job across "machines": three network namespaces this test creates (root: ip netns),
// joined by a bridge in a fourth, each with its own nats-server (routes to the others over
// the namespaces' private addresses, 10.231.0.0/24) and a node agent (test/netns-machine.ts).
// A `run` and a small `train` launched from the first namespace on the three agents give
// what they give on one server: the same tasks and messages, the same parameter checksum.
// Everything is torn down by pid and the namespaces deleted, also when the test fails.
// Where namespaces cannot be made (not root, no CAP_NET_ADMIN, no ip), it says so and is skipped.

import { strict as assert } from 'assert';
import { ChildProcess, spawn, spawnSync } from 'child_process';
import { mkdtempSync, rmSync } from 'fs';
import * as os from 'os';
import * as path from 'path';
import { CLI_ENTRY } from '../cli/run';
import { childJson } from '../bench/child-json';

const MACHINES = ['a', 'b', 'c'];
const tag = `bt${process.pid}`;
const ns = (m: string) => `${tag}-${m}`;
const SWITCH = ns('sw');
const addr = (k: number) => `10.231.0.${k + 1}`;
const CLUSTER_PORT = 6222;

function ip(...args: string[]): void {
  const r = spawnSync('ip', args, { encoding: 'utf8', timeout: 10_000 });
  if (r.status !== 0) throw new Error(`ip ${args.join(' ')}: ${r.error?.message ?? r.stderr.trim()}`);
}

/** Why namespaces cannot be made here, or null when they can. */
function cannotMakeNamespaces(): string | null {
  if (process.getuid?.() !== 0) return 'not root';
  const probe = `${tag}-probe`;
  const r = spawnSync('ip', ['netns', 'add', probe], { encoding: 'utf8', timeout: 10_000 });
  if (r.error) return `ip (iproute2) cannot run: ${r.error.message}`;
  if (r.status !== 0) return `ip netns add failed (no CAP_NET_ADMIN?): ${r.stderr.trim()}`;
  spawnSync('ip', ['netns', 'del', probe]);
  return null;
}

/** The three machines' namespaces on one bridge (in a namespace of its own: nothing in the host's). */
function makeNetwork(): void {
  ip('netns', 'add', SWITCH);
  ip('-n', SWITCH, 'link', 'add', 'br0', 'type', 'bridge');
  ip('-n', SWITCH, 'link', 'set', 'br0', 'up');
  MACHINES.forEach((m, k) => {
    ip('netns', 'add', ns(m));
    ip('link', 'add', 'eth0', 'netns', ns(m), 'type', 'veth', 'peer', 'name', `p${m}`, 'netns', SWITCH);
    ip('-n', SWITCH, 'link', 'set', `p${m}`, 'master', 'br0', 'up');
    ip('-n', ns(m), 'addr', 'add', `${addr(k)}/24`, 'dev', 'eth0');
    ip('-n', ns(m), 'link', 'set', 'eth0', 'up');
    ip('-n', ns(m), 'link', 'set', 'lo', 'up');
  });
}

/** Kills what is left in our namespaces (only processes this test started run there) and deletes them. */
function removeNetwork(): void {
  for (const n of [...MACHINES.map(ns), SWITCH]) {
    const pids = spawnSync('ip', ['netns', 'pids', n], { encoding: 'utf8' }).stdout ?? '';
    for (const pid of pids.split(/\s+/).filter(Boolean))
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {
        /* gone */
      }
    spawnSync('ip', ['netns', 'del', n]);
  }
}

interface Machine {
  child: ChildProcess;
  url: Promise<string>;
  routed: Promise<void>;
}

function startMachine(k: number, keyFile: string): Machine {
  const spec = {
    name: `m-${MACHINES[k]}`,
    clusterHost: addr(k),
    clusterPort: CLUSTER_PORT,
    routes: MACHINES.slice(0, k).map((_, j) => `nats-route://${addr(j)}:${CLUSTER_PORT}`),
    agents: [`agent-${MACHINES[k]}`],
    keyFile,
    expectRoutes: MACHINES.length - 1,
  };
  const script = path.join(__dirname, 'netns-machine.js');
  const child = spawn('ip', ['netns', 'exec', ns(MACHINES[k]), process.execPath, script, JSON.stringify(spec)], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const line = (re: RegExp) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const look = () => {
        const hit = out.split('\n').find((l) => re.test(l));
        if (hit) resolve(JSON.parse(hit));
      };
      child.stdout!.on('data', (d: Buffer) => ((out += d.toString()), look()));
      child.on('exit', (code) => reject(new Error(`machine ${MACHINES[k]} exited with ${code}: ${err}`)));
      setTimeout(() => reject(new Error(`machine ${MACHINES[k]}: no ${re} after 90 s: ${err}`)), 90_000).unref();
    });
  const url = line(/"url"/).then((j) => String(j.url));
  const routed = line(/"routed"/).then(() => {});
  url.catch(() => {});
  routed.catch(() => {});
  return { child, url, routed };
}

async function stopMachine(m: Machine): Promise<void> {
  if (m.child.exitCode !== null || m.child.signalCode !== null) return;
  const exited = new Promise((r) => m.child.once('exit', r));
  m.child.kill('SIGTERM');
  const late = setTimeout(() => m.child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(late);
}

/** `baton …` with --json, in namespace `n` or (null) here; its JSON. */
function batonJson(n: string | null, args: string[]): Promise<Record<string, unknown>> {
  const [cmd, argv] = n
    ? ['ip', ['netns', 'exec', n, process.execPath, CLI_ENTRY, ...args]]
    : [process.execPath, [CLI_ENTRY, ...args]];
  return childJson(cmd, argv, `baton ${args[0]}`) as Promise<Record<string, unknown>>;
}

const RUN = ['run', '--stages', '3', '--microbatches', '6', '--iterations', '2', '--profile', 'uniform', '--json'];
const TRAIN = [
  'train',
  ...['--model', 'gpt', '--stages', '3', '--layers', '3', '--width', '16', '--heads', '2', '--seq', '8'],
  ...['--microbatch-size', '2', '--microbatches', '4', '--iterations', '2', '--val-batches', '1'],
  ...['--quiet', '--json'],
];

describe('a job across network namespaces, a nats-server each, joined by routes', function () {
  this.timeout(240_000);
  const why = cannotMakeNamespaces();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'baton-netns-'));
  const keyFile = path.join(dir, 'key');
  const machines: Machine[] = [];

  before(async function () {
    if (why) {
      const banner = `\n*** NETWORK-NAMESPACE TEST NOT RUN: ${why}. It needs root with CAP_NET_ADMIN and iproute2 (ip netns). ***\n`;
      process.stderr.write(banner);
      this.skip();
    }
    const key = spawnSync(process.execPath, [CLI_ENTRY, 'auth', 'key', keyFile], { encoding: 'utf8' });
    assert.equal(key.status, 0, key.stderr);
    makeNetwork();
    MACHINES.forEach((_, k) => machines.push(startMachine(k, keyFile)));
    await Promise.all(machines.map((m) => m.routed));
  });

  after(async () => {
    for (const m of machines) await stopMachine(m);
    if (!why) removeNetwork();
    rmSync(dir, { recursive: true, force: true });
  });

  const onAgents = async () => [
    ...['--transport', 'nats', '--nats', await machines[0].url],
    ...['--nodes', MACHINES.map((m) => `agent-${m}`).join(','), '--node-key-file', keyFile],
  ];

  it('completes a run from the first machine with the tasks and messages of one server', async () => {
    const [spread, one] = await Promise.all([
      onAgents().then((flags) => batonJson(ns('a'), [...RUN, '--job', 'spread', ...flags])),
      batonJson(null, [...RUN, '--transport', 'nats', '--processes', 'single']),
    ]);
    assert.equal(spread.tasks, 2 * 3 * 6 * 2);
    assert.deepEqual([spread.tasks, spread.messages], [one.tasks, one.messages]);
    assert.equal(spread.processes, 3, JSON.stringify(spread.pids));
  });

  it('trains with the parameter checksum of one server', async () => {
    const spread = await batonJson(ns('a'), [...TRAIN, '--job', 'spread-train', ...(await onAgents())]);
    const one = await batonJson(null, [...TRAIN, '--transport', 'nats', '--processes', 'single']);
    assert.match(String(one.param_checksum), /^[0-9a-f]{64}$/);
    assert.equal(spread.param_checksum, one.param_checksum);
    assert.equal(spread.processes, 3);
  });
});
