import { ChildProcess, spawn } from 'child_process';
import * as path from 'path';

const CLI = path.join(__dirname, '..', 'cli', 'main.js');

/** A `baton node --json` agent process on the server at `url`, its stdout (where its ready line comes) piped. */
export function nodeAgent(url: string, keyFile: string, name: string): ChildProcess {
  return spawn(process.execPath, [CLI, 'node', '--nats', url, '--key-file', keyFile, '--name', name, '--json'], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
}

/** Resolves once every agent has printed its ready line. */
export async function agentsReady(agents: ChildProcess[]): Promise<void> {
  await Promise.all(agents.map((a) => new Promise<void>((resolve) => a.stdout!.once('data', () => resolve()))));
}

/** Ends agents a test may have stopped (SIGSTOP): each is resumed, then sent `signal`. */
export function endAgents(agents: ChildProcess[], signal: NodeJS.Signals): void {
  for (const a of agents) {
    try {
      process.kill(a.pid!, 'SIGCONT');
    } catch {
      /* gone */
    }
    a.kill(signal);
  }
}
