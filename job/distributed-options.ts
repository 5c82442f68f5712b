// A distributed job's options and result, and how its stages are dealt to the nodes
// under which lease.

import { HEARTBEAT_DEFAULTS } from './defaults';
import { Bus } from '../transport/bus';
import { MAX_TIMER_MS } from '../base/clock';
import { IterationRecord } from '../actors/coordinator';
import { EventSink } from '../stage/events';
import { JobConfig } from './config';
import { JobResult } from './run-local';
import { MIN_LEASE_MS, NODE_NAME_RE, NodeSubjects } from '../actors/node-agent';
import { JobConfigError, JobError } from './wire-stage';
import { TOKEN_CHARS } from '../base/token';
import { lanesOf } from '../transport/lanes';

export interface DistributedOptions {
  bus: Bus;
  /** Node agents to use, by name; stages are dealt to them in contiguous blocks. */
  nodes: string[];
  /** Where they are reached: standalone agents' shared subjects (default), or the job's own for agents started for it. */
  nodeSubjects?: NodeSubjects;
  /** How long to wait for nodes to announce themselves and answer, ms. */
  nodeTimeoutMs?: number;
  /** Pause between hosting and the first iteration, so subscriptions spread over a cluster (ms, default 200). */
  settleMs?: number;
  sinks?: EventSink[];
  onIteration?: (r: IterationRecord) => void;
  /** Rejects when the job cannot go on (a stage process died, the launcher was interrupted): the job fails with that error at once. */
  stop?: Promise<never>;
  /** The nodes drop the job's stages when they hear nothing from this launcher for this long, and the
   * launcher fails the job when a node answers nothing for as long (ms; default the job's stall timeout,
   * the same bound on a task that blocks its process); renewed every quarter of it. */
  leaseMs?: number;
  /** Replay an iteration that lost a stage process instead of failing (job/recovery.ts); absent: a loss fails the job. */
  recovery?: RecoveryOptions;
}

/** How a launcher recovers its own stage processes. */
export interface RecoveryOptions {
  /** Failures survived before the job fails naming them all (--max-restarts). */
  readonly maxRestarts: number;
  /** Sync: each stage sends its state every this many flushes (--state-every; 0: never, a replay starts from the job's start). */
  readonly stateEvery: number;
  /** Ends the process of node `name` if it is still there (a stopped one too) and starts a new one. */
  restart(name: string): Promise<void>;
  /** Registers the listener told when a node's process ends on its own (not by restart or the job's end). */
  onExit(listener: (name: string, why: string) => void): void;
  /**
   * The launcher's connection to NATS, when a drop is to be survived: a drop loses what was in
   * flight, so the iteration is replayed once the connection is back (`up` rejects when it
   * does not come back in time). Absent: the caller ends the job on a drop.
   */
  readonly connection?: {
    onDrop(listener: (why: Error) => void): void;
    up(timeoutMs: number): Promise<void>;
  };
}

/** One failure a recoverable job survived: what failed, when it was known, when training resumed, what was replayed. */
export interface RecoveryRecord {
  /** The node whose process was lost (null: messages were lost), its stages, and what the launcher saw. */
  readonly failed: string | null;
  readonly stages: number[];
  readonly reason: string;
  /** The iteration under way when it was detected, and the first one replayed. */
  readonly iteration: number;
  readonly resumed_from: number;
  readonly iterations_replayed: number;
  /** Wall-clock times (ms since the epoch): detected, and training resumed (the replay's first iteration began). */
  readonly detected_at: number;
  resumed_at: number;
  /** resumed_at - detected_at. */
  recovery_ms: number;
  /** Asynchronous mode (job/async-recovery.ts), per stage: the updates of the snapshot it resumed
   * from (0: the seed's parameters); the updates it had made since and lost (at least: counted
   * from the trace; their microbatches from resumed_at_microbatch on are fed again); and the
   * microbatches before resumed_at_microbatch it will never update with (skipped for good). */
  snapshot_updates?: number[];
  lost_updates?: number[];
  skipped_updates?: number[];
  resumed_at_microbatch?: number;
}

export interface DistributedResult extends JobResult {
  /** Each node's process: its pid and machine name (pids repeat across machines). */
  nodes: { name: string; pid: number; host: string; stages: number[] }[];
  /** The failures survived by replaying (a recoverable job; empty when none came). */
  recoveries?: RecoveryRecord[];
  /** What keeping every stage's state as of the last flush cost: state messages and their bytes. */
  kept_state?: { messages: number; bytes: number; copy_ms?: { median: number; min: number; max: number } };
}

/** Contiguous blocks of stages per node: P=8 over 3 nodes gives 0-2, 3-5, 6-7. */
export function assignStages(stages: number, nodes: number): number[][] {
  const out: number[][] = Array.from({ length: nodes }, () => []);
  for (let s = 0; s < stages; s++) out[Math.floor((s * nodes) / stages)].push(s);
  return out.filter((b) => b.length > 0);
}

/** What one node hosts: a block of stages and, in a job of T > 1 ranks or D > 1 replicas, the lane they are of. */
export interface NodeBlock {
  readonly stages: number[];
  readonly lane?: { readonly rank: number; readonly replica: number };
}

/** Contiguous blocks of stages per node; a wide job takes one node per stage of each lane (rank, replica). */
export function assignBlocks(cfg: Pick<JobConfig, 'stages' | 'tp' | 'dp'>, nodes: number): NodeBlock[] {
  if (cfg.tp === 1 && cfg.dp === 1) return assignStages(cfg.stages, nodes).map((stages) => ({ stages }));
  const blocks = lanesOf(cfg.tp, cfg.dp).flatMap(({ rank, replica }) =>
    Array.from({ length: cfg.stages }, (_, s) => ({ stages: [s], lane: { rank, replica } })),
  );
  if (nodes !== blocks.length)
    throw new JobConfigError(
      `a job of ${cfg.stages} stages × ${cfg.tp} ranks × ${cfg.dp} replicas takes one node per stage of each rank and replica, ${blocks.length}; got ${nodes}`,
    );
  return blocks;
}

/** The lease the nodes hold the job's stages under, checked. */
export function leaseOf(cfg: JobConfig, o: DistributedOptions): number {
  for (const n of o.nodes)
    if (!NODE_NAME_RE.test(n)) throw new JobError(`node name ${JSON.stringify(n)} does not match ${TOKEN_CHARS}`);
  const leaseMs = Math.max(
    MIN_LEASE_MS,
    Math.round(o.leaseMs ?? Math.max(cfg.stallTimeoutMs, HEARTBEAT_DEFAULTS.minLeaseMs)),
  );
  if (!(leaseMs <= MAX_TIMER_MS))
    throw new JobConfigError(
      `the lease (by default the stall timeout) is ${leaseMs} ms; it must be at most ${MAX_TIMER_MS} ms, the longest timer Node keeps`,
    );
  return leaseMs;
}
