// Heartbeats: every node agent process beats on <its node prefix>.beat.<name>
// (baton._nodes.beat.<name>, or baton.<job>.node.beat.<name> for an agent started for a job) from a thread of
// its own (heartbeat-worker.ts), saying how long its main thread's loop has been still and
// whether that thread is inside a compute task (base/task-activity.ts). A launcher
// (HeartbeatMonitor) fails the job when a node it uses stops beating for the timeout (the
// process died or was stopped). A node inside a long task beats as busy, which counts as
// progress. Beats are sealed under the job key like every other message (a launcher over an
// AuthBus takes a beat on beat.<name> only when sealed by node:<name>); still, only their
// absence fails a job: a main thread hung outside a task while its heartbeat thread beats
// is left to the stall watchdog.

import * as path from 'path';
import { Worker } from 'worker_threads';
import { Bus, Subscription } from '../transport/bus';
import { decodeValue } from '../transport/codec';
import { NODES_PREFIX, NodeSubjects, STANDALONE_NODES } from '../actors/node-agent';
import { activityBuffer, tickLoop } from '../base/task-activity';
import { HEARTBEAT_DEFAULTS } from './defaults';
import type { NatsAccess } from '../transport/nats-access';

export const BEAT_PREFIX = `${NODES_PREFIX}.beat`;

/** Starts this process's heartbeat thread; returns a stop function. */
export function startHeartbeat(
  url: string,
  key: Uint8Array,
  name: string,
  log: (l: string) => void,
  access: NatsAccess = {},
  subjects: NodeSubjects = STANDALONE_NODES,
): () => void {
  const stopTicks = tickLoop(HEARTBEAT_DEFAULTS.loopTickMs);
  const worker = new Worker(path.join(__dirname, 'heartbeat-worker.js'), {
    workerData: {
      url,
      access,
      key,
      subject: subjects.beat(name),
      name,
      pid: process.pid,
      everyMs: HEARTBEAT_DEFAULTS.everyMs,
      activity: activityBuffer(),
    },
  });
  worker.unref();
  worker.on('message', (m: { error?: string }) => m.error && log(`node ${name}: heartbeats stopped: ${m.error}`));
  worker.on('error', (e) => log(`node ${name}: heartbeat thread failed: ${e.message}`));
  return () => {
    stopTicks();
    worker.postMessage('stop');
  };
}

interface Beat {
  at: number;
  pid: number;
  loopLagMs: number;
  inTaskMs: number;
  tasksDone: number;
}

function beatOf(data: Uint8Array): Beat | null {
  try {
    const v = decodeValue(data) as Record<string, unknown>;
    const nums = ['pid', 'loopLagMs', 'inTaskMs', 'tasksDone'] as const;
    if (v?.verb !== 'beat' || !nums.every((k) => Number.isFinite(v[k]))) return null;
    return {
      at: Date.now(),
      pid: v.pid as number,
      loopLagMs: v.loopLagMs as number,
      inTaskMs: v.inTaskMs as number,
      tasksDone: v.tasksDone as number,
    };
  } catch {
    return null;
  }
}

/** The launcher's view of its nodes' heartbeats. */
export class HeartbeatMonitor {
  private readonly last = new Map<string, Beat>();
  private readonly subs: Subscription[];
  private timer: NodeJS.Timeout | undefined;
  /** Beats that were refused (malformed, or from a node the job does not use). */
  rejected = 0;
  private busyBeats = 0;

  private confirming = false;

  constructor(
    private readonly bus: Bus,
    nodes: readonly string[],
    private readonly onBeat: (node: string) => void = () => {},
    subjects: NodeSubjects = STANDALONE_NODES,
  ) {
    // One subscription per node of the job, not a wildcard: on a shared server the launcher
    // may read only its own agents' beats (docs/operations.md, NATS permissions).
    this.subs = nodes.map((node) => bus.subscribe(subjects.beat(node), (_s, data) => this.onData(node, data)));
  }

  private onData(node: string, data: Uint8Array): void {
    const b = beatOf(data);
    if (!b) {
      this.rejected++;
      return;
    }
    // Progress only while a task holds the process's loop (a long compute): a task handler
    // awaiting, and the stage messages of a resend loop that never gets its message, are not.
    const beat = HEARTBEAT_DEFAULTS.everyMs;
    if (b.inTaskMs >= beat && b.loopLagMs >= beat) this.busyBeats++;
    this.last.set(node, b);
    this.onBeat(node);
  }

  /**
   * Grows while a node sits inside a long task that holds its loop: progress for a stall
   * watchdog that counts finished tasks from the trace (a beat's tasksDone counts every
   * message a stage handled, resend requests too, so it is not progress).
   */
  progress(): number {
    return this.busyBeats;
  }

  /** Checks every `everyMs`; calls `fail` once with what went wrong. Nodes that never beat are not judged. */
  watch(timeoutMs: number, fail: (why: string, node: string, detectedAt: number) => void): void {
    const every = Math.max(20, Math.min(HEARTBEAT_DEFAULTS.checkMs, timeoutMs / 8));
    let lastLook = Date.now();
    const check = () => {
      const now = Date.now();
      // This thread was held: the beats that came meanwhile are not read yet, so each node gets a fresh window.
      if (now - lastLook > Math.max(4 * every, timeoutMs / 2)) for (const b of this.last.values()) b.at = now;
      lastLook = now;
      for (const [node, b] of this.last) {
        const silent = now - b.at;
        const why =
          silent > timeoutMs ? `node ${node} (pid ${b.pid}) sent no heartbeat for ${silent} ms: dead or stopped` : null;
        if (why && !this.confirming) {
          // Beats this process has not read yet (its own loop was busy) arrive before a
          // round trip to the server completes: only a node still silent after it has failed.
          this.confirming = true;
          void this.bus
            .flush()
            .catch(() => {})
            .then(() => new Promise((r) => setImmediate(r)))
            .then(() => {
              this.confirming = false;
              const still = this.last.get(node);
              if (!this.timer || !still) return;
              const t = Date.now();
              if (still.at !== b.at) return;
              this.stop();
              fail(why, node, t);
            });
          return;
        }
      }
    };
    this.timer = setInterval(check, every);
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  close(): void {
    this.stop();
    for (const s of this.subs) s.unsubscribe();
  }
}
