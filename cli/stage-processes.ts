// The stage processes a launcher starts (`baton node`, one per stage, or per stage of each
// rank and replica): their key and NATS URL handed down a pipe only the launcher holds,
// stopped with the job and on exit, SIGINT or SIGTERM, restarted when recovery asks.

import { ChildProcess, spawn } from 'child_process';
import * as path from 'path';
import { JobError } from '../job/job-errors';
import { onProcessEnd } from '../transport/process-cleanup';
import { ResolvedAccess, natsAccessEnv } from './nats-flag';
import { THREADS_ENV, defaultThreads } from '../models/threads';
import { keyText } from '../transport/auth-seal';

/** The `baton` command's entry point, for starting it as a child process. */
export const CLI_ENTRY = path.join(__dirname, 'main.js');

/** Stage processes this launcher started: stopped at the end, and on exit, SIGINT or SIGTERM. */
export interface SpawnedNodes {
  readonly children: ReadonlyMap<string, ChildProcess>;
  /** Rejects when one of them ends before stop() was called (unless an exit listener is set). */
  readonly died: Promise<never>;
  /** Kills node `name`'s process if it is still there (SIGKILL: a stopped one too) and starts a new one. */
  restart(name: string): Promise<void>;
  /** From now on a process that ends on its own is told to `listener` instead of rejecting `died`. */
  onExit(listener: (name: string, why: string) => void): void;
  stop(): Promise<void>;
}

/** `baton node`'s arguments for stage process `name` of `job`: its key and URL come on stdin. */
function stageNodeArgs(name: string, job: string, allowedFiles: readonly string[]): string[] {
  return [
    'node',
    '--name',
    name,
    '--job',
    job,
    '--quiet',
    '--exit-with-stdin',
    '--private',
    '--key-stdin',
    '--nats-stdin',
    ...(allowedFiles.length > 0 ? ['--allow-files', allowedFiles.join(',')] : []),
  ];
}

export function spawnNodes(
  server: { urls: readonly string[]; access: ResolvedAccess | undefined },
  job: string,
  names: string[],
  nodeFlags: readonly string[],
  allowedFiles: readonly string[],
  key: Uint8Array,
  threads?: number,
): SpawnedNodes {
  const threadsEach = String(threads ?? (process.env[THREADS_ENV] || defaultThreads(names.length)));
  let stopping = false;
  let died: (e: Error) => void = () => {};
  let exitListener: ((name: string, why: string) => void) | null = null;
  const diedPromise = new Promise<never>((_, reject) => (died = reject));
  diedPromise.catch(() => {});
  const children = new Map<string, ChildProcess>();
  const replaced = new Set<ChildProcess>();
  const start = (name: string): ChildProcess => {
    const child = spawn(process.execPath, [...nodeFlags, CLI_ENTRY, ...stageNodeArgs(name, job, allowedFiles)], {
      stdio: ['pipe', 'ignore', 'pipe'],
      // The paths of the access files go in the environment, not on the command line (which `ps` shows to every user).
      env: {
        ...natsAccessEnv(process.env, undefined, server.access?.access ?? {}, path.resolve),
        [THREADS_ENV]: threadsEach,
      },
    });
    // The launch's key and the process's NATS URL (its credentials in it) go down the pipe
    // only this launcher holds (not argv, which ps shows to everyone, or the environment).
    child.stdin?.on('error', () => {});
    child.stdin?.write(`${keyText(key)}\n${server.urls[names.indexOf(name)]}\n`);
    child.stderr?.on('data', (d: Buffer) => process.stderr.write(`[${name}] ${d}`));
    child.once('exit', (code, signal) => {
      if (stopping || replaced.has(child)) return;
      const why = signal ? `signal ${signal}` : `exit code ${code}`;
      if (exitListener) exitListener(name, `pid ${child.pid}, ${why}`);
      else died(new JobError(`stage process ${name} (pid ${child.pid}) ended during the job (${why})`));
    });
    children.set(name, child);
    return child;
  };
  for (const name of names) start(name);
  const forget = onProcessEnd(() => {
    for (const c of children.values()) if (c.exitCode === null && c.signalCode === null) c.kill('SIGTERM');
  });
  return {
    children,
    died: diedPromise,
    restart: async (name) => {
      const old = children.get(name);
      if (old) {
        replaced.add(old);
        await new Promise<void>((resolve) => {
          if (old.exitCode !== null || old.signalCode !== null) return resolve();
          old.once('exit', () => resolve());
          old.kill('SIGKILL');
        });
      }
      start(name);
    },
    onExit: (listener) => (exitListener = listener),
    stop: async () => {
      stopping = true;
      await stopChildren([...children.values()]);
      forget();
    },
  };
}

async function stopChildren(children: ChildProcess[]): Promise<void> {
  await Promise.all(
    children.map(
      (c) =>
        new Promise<void>((resolve) => {
          if (c.exitCode !== null || c.signalCode !== null) return resolve();
          const t = setTimeout(() => c.kill('SIGKILL'), 3000);
          c.once('exit', () => {
            clearTimeout(t);
            resolve();
          });
          c.kill('SIGTERM');
        }),
    ),
  );
}
