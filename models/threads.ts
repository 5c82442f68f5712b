// How many threads a compute process uses for its native kernels (BLAS): as many as it
// is given, by default the node's cores shared evenly among the stage processes on it,
// so P stage processes on one machine do not oversubscribe its cores. A launcher passes
// the count to the stage processes it starts in env BATON_THREADS; a process reads it
// when its backend loads (models/native-kernels.ts).
//
// Not modelled: the wasm backend's own threads (Node runs its single-threaded build).

import * as os from 'os';

export const THREADS_ENV = 'BATON_THREADS';

export class ThreadsError extends Error {
  override name = 'ThreadsError';
}

export function cores(): number {
  return typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
}

/** The node's cores over the compute processes on it, at least 1. */
export function defaultThreads(processesOnNode: number): number {
  if (!Number.isInteger(processesOnNode) || processesOnNode < 1)
    throw new ThreadsError(`threads: processes on this node must be a positive integer, got ${processesOnNode}`);
  return Math.max(1, Math.floor(cores() / processesOnNode));
}

/** A thread count from a flag or the environment; `source` names it in the error. */
export function parseThreads(value: unknown, source: string): number {
  const n = typeof value === 'string' && /^\d+$/.test(value.trim()) ? Number(value) : value;
  if (!Number.isInteger(n) || (n as number) < 1 || (n as number) > 1024)
    throw new ThreadsError(`${source}: threads must be an integer in [1, 1024], got ${JSON.stringify(value)}`);
  return n as number;
}

/** BATON_THREADS when set, else null. */
export function threadsFromEnv(env: NodeJS.ProcessEnv = process.env): number | null {
  const v = env[THREADS_ENV];
  return v === undefined || v === '' ? null : parseThreads(v, THREADS_ENV);
}
