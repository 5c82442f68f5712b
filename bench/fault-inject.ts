// Faults injected into the stage processes a launcher in this process started: found by
// their node name among this process's children (Linux /proc), sent a signal
// mid-iteration; or into a nats-server this process started: killed mid-iteration and
// started again on the same port. Used by the fault matrix (bench/faults.ts) and
// test/recovery.test.ts.

import { readFileSync, readdirSync } from 'fs';
import { IterationRecord } from '../actors/coordinator';
import { JobConfig, resolveConfig } from '../job/config';
import { TRAIN_DEFAULTS } from '../job/defaults';
import { TrainConfig } from '../models/train-config';
import { NatsServerHandle, startNatsServer } from '../transport/nats-server';
import type { NatsServerOptions } from '../transport/nats-server-config';

/** The job faults are injected into: a synchronous train of P = 4, M = 4 that only a hang would stall (10 min), `model` over the defaults. */
export function faultedTrainJob(job: string, iterations: number, model: Partial<TrainConfig> = {}): JobConfig {
  return resolveConfig({
    job,
    stages: 4,
    microbatches: 4,
    iterations,
    profile: 'train',
    stallTimeoutMs: 600_000,
    train: { ...TRAIN_DEFAULTS, ...model, totalIterations: iterations, valBatches: 1 },
  });
}

/** The pid of the stage process this process started for stage `s` of job `job`. */
export function stageProcessPid(job: string, s: number): number {
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid !== process.pid) continue;
      if (readFileSync(`/proc/${d}/cmdline`, 'utf8').includes(`${job}-stage${s}-`)) return Number(d);
    } catch {
      /* gone meanwhile */
    }
  }
  throw new Error(`no stage process of stage ${s} of job ${job} among this process's children`);
}

/** A signal to stage `stage` of `job` a fraction of an iteration (default half) after iteration `after` ended: mid-iteration. */
export interface InjectedFault {
  /** Give to the run's onIteration. */
  readonly onIteration: (rec: IterationRecord) => void;
  /** When the signal went (Date.now()), 0 before; and the pid it went to. */
  at(): number;
  pid(): number;
  /** The signalled process, killed if it is still there (a stopped one left behind). */
  cleanup(): void;
}

export function injectFault(
  job: string,
  stage: number,
  signal: NodeJS.Signals,
  after: number,
  fraction = 0.5,
): InjectedFault {
  let at = 0;
  let pid = 0;
  let armed = false;
  return {
    onIteration: (rec) => {
      if (rec.iteration !== after || armed) return;
      armed = true;
      setTimeout(() => {
        pid = stageProcessPid(job, stage);
        at = Date.now();
        process.kill(pid, signal);
      }, rec.makespan * fraction);
    },
    at: () => at,
    pid: () => pid,
    cleanup: () => {
      if (pid > 0)
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          /* gone, as it should be */
        }
    },
  };
}

/** The nats-server killed half an iteration after iteration `after` ended and started again on its port `downMs` later. */
export interface InjectedServerRestart {
  readonly onIteration: (rec: IterationRecord) => void;
  /** When it was killed (Date.now()), 0 before. */
  at(): number;
  /** Resolves once the new server is up (at once when nothing was injected); rejects when it could not start. */
  restarted(): Promise<void>;
  /** The server running now (the new one once restarted). */
  server(): NatsServerHandle;
}

/** `options`: what the first server was started with, so the restarted one is the same server. */
export function injectServerRestart(
  first: NatsServerHandle,
  after: number,
  downMs = 1000,
  options: NatsServerOptions = {},
): InjectedServerRestart {
  let current = first;
  let at = 0;
  let restart: Promise<void> | null = null;
  return {
    onIteration: (rec) => {
      if (rec.iteration !== after || restart) return;
      restart = new Promise<void>((resolve, reject) =>
        setTimeout(() => {
          at = Date.now();
          current
            .stop()
            .then(() => new Promise((r) => setTimeout(r, downMs)))
            .then(() => startNatsServer({ ...options, port: first.port }))
            .then((s) => {
              current = s;
              resolve();
            }, reject);
        }, rec.makespan / 2),
      );
      // Read by restarted(); a failed start must not go unhandled meanwhile.
      restart.catch(() => {});
    },
    at: () => at,
    restarted: () => restart ?? Promise.resolve(),
    server: () => current,
  };
}
