// A `baton node` agent process a benchmark starts (through a wrapper such as a cgroup's),
// with one BLAS thread, ready once it prints its JSON line (private to the benchmark, or a
// NATS service that measured its own speed and registered); it ends when stopped, and with
// the benchmark (its stdin closes), so none outlives a benchmark killed mid-run.

import { ChildProcess, spawn } from 'child_process';
import { CLI_ENTRY } from '../cli/run';
import { childJson } from './child-json';

export interface AgentProcess {
  readonly name: string;
  readonly pid: number;
  stop(): Promise<void>;
}

type Runner = (cmd: string, args: readonly string[]) => [string, string[]];

function untilReady(child: ChildProcess, name: string, timeoutMs: number, line: RegExp): Promise<void> {
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    const timer = setTimeout(
      () => reject(new Error(`node agent ${name} not ready after ${timeoutMs} ms: ${err}`)),
      timeoutMs,
    );
    child.stderr!.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-2000)));
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (line.test(out)) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`node agent ${name} exited with ${code}: ${err.trim()}`));
    });
  });
}

export async function startAgent(
  run: Runner,
  o: { url: string; keyFile: string; name: string; timeoutMs?: number; service?: { calibrateMs: number } },
): Promise<AgentProcess> {
  const [cmd, args] = run(process.execPath, [
    CLI_ENTRY,
    'node',
    ...['--nats', o.url, '--key-file', o.keyFile, '--name', o.name, '--json', '--quiet', '--exit-with-stdin'],
    ...(o.service ? ['--calibrate-ms', String(o.service.calibrateMs)] : ['--private']),
  ]);
  const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, BATON_THREADS: '1' } });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  };
  try {
    // A service is ready once it has measured itself and registered.
    const line = o.service ? /"registered":\s*true/ : /"ready":\s*true/;
    await untilReady(child, o.name, o.timeoutMs ?? 30_000, line);
  } catch (e) {
    await stop();
    throw e;
  }
  return { name: o.name, pid: child.pid ?? -1, stop };
}

export interface NodeSpeed {
  node: string;
  gflops_stage: number;
  gflops_matmul: number;
}

/** The agents' own measurements, as any client of the services API reads them. */
export async function measuredSpeeds(url: string, nodes: readonly string[]): Promise<NodeSpeed[]> {
  const listed = (await childJson(process.execPath, [CLI_ENTRY, 'nodes', '--nats', url, '--json'], 'baton nodes')) as {
    nodes: NodeSpeed[];
  };
  return nodes.map((n) => {
    const found = listed.nodes.find((x) => x.node === n);
    if (!found) throw new Error(`baton nodes does not list ${n}`);
    return found;
  });
}
