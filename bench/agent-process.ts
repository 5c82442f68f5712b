// A `baton node` agent process a benchmark starts (through a wrapper such as a cgroup's),
// with one BLAS thread, ready once it prints its JSON line; it ends when stopped, and with
// the benchmark (its stdin closes), so none outlives a benchmark killed mid-run.

import { ChildProcess, spawn } from 'child_process';
import { CLI_ENTRY } from '../cli/run';

export interface AgentProcess {
  readonly name: string;
  readonly pid: number;
  stop(): Promise<void>;
}

type Runner = (cmd: string, args: readonly string[]) => [string, string[]];

function untilReady(child: ChildProcess, name: string, timeoutMs: number): Promise<void> {
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
      if (/"ready":\s*true/.test(out)) {
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
  o: { url: string; keyFile: string; name: string; timeoutMs?: number },
): Promise<AgentProcess> {
  const [cmd, args] = run(process.execPath, [
    CLI_ENTRY,
    'node',
    ...['--nats', o.url, '--key-file', o.keyFile, '--name', o.name, '--json', '--quiet', '--exit-with-stdin'],
  ]);
  const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, BATON_THREADS: '1' } });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  };
  try {
    await untilReady(child, o.name, o.timeoutMs ?? 30_000);
  } catch (e) {
    await stop();
    throw e;
  }
  return { name: o.name, pid: child.pid ?? -1, stop };
}
