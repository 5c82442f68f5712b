// A stage's periodic stats for watchers (`baton inspect`): a few times a second, not per
// task, one small CBOR map on baton.<job>.stats.<stage> with the stage's status (current
// task, ready set, buffer occupancy against its limit, policy in force) and running totals
// from its events (tasks, messages and bytes each way, blocked time), from which a watcher
// takes rates. Only on the real clock over NATS: the virtual clock has no one watching.

import { BatonEvent, EventSink } from '../stage/events';
import { StageStatus } from '../stage/stage-state';
import { Bus, Subscription } from '../transport/bus';
import { encodeValue } from '../transport/codec';
import { launchField } from '../transport/envelope';
import { subject } from '../transport/subjects';
import { ActorRef, ActorRuntime } from './runtime';
import { StageActorMsg } from './stage';

export interface StageTotals {
  tasks: number;
  sent: number;
  sentBytes: number;
  received: number;
  receivedBytes: number;
  blockedMs: number;
  rejected: number;
}

/** What a stats message carries (cli/inspect-view.ts reads it back). */
export interface StageStats extends StageTotals {
  readonly v: 1;
  readonly job: string;
  readonly launch?: string;
  readonly stage: number;
  /** ms since the stage was wired, on its clock. */
  readonly upMs: number;
  readonly iteration: number | null;
  readonly running: string | null;
  readonly ready: { F: string[]; B: string[]; W: string[] };
  readonly inflight: number;
  readonly limit: number;
  readonly policy: string;
  readonly swapsPending: number;
}

const MAX_LISTED = 12;

export function countingSink(sink: EventSink, totals: StageTotals): EventSink {
  return (e: BatonEvent) => {
    sink(e);
    switch (e.type) {
      case 'task-start':
        totals.tasks++;
        break;
      case 'send':
        totals.sent++;
        totals.sentBytes += e.bytes;
        break;
      case 'receive':
        totals.received++;
        totals.receivedBytes += e.bytes;
        break;
      case 'wait':
        totals.blockedMs += e.ms;
        break;
      case 'reject':
        totals.rejected++;
        break;
    }
  };
}

export function newTotals(): StageTotals {
  return { tasks: 0, sent: 0, sentBytes: 0, received: 0, receivedBytes: 0, blockedMs: 0, rejected: 0 };
}

export interface StatsWiring {
  readonly runtime: ActorRuntime;
  readonly bus: Bus;
  readonly job: string;
  readonly stage: number;
  readonly limit: number;
  readonly launch?: string;
  readonly everyMs: number;
  readonly totals: StageTotals;
  readonly target: ActorRef<StageActorMsg>;
}

/** Start publishing; the subscription's unsubscribe stops it. */
export function publishStats(w: StatsWiring): Subscription {
  const t0 = performance.now();
  let stopped = false;
  const tick = async () => {
    let s: StageStatus;
    try {
      s = await w.runtime.ask<StageActorMsg, StageStatus>(w.target, (reply) => ({ type: 'status', reply }), 1000);
    } catch {
      return; // a busy or stopped stage: the next tick tries again
    }
    if (stopped) return;
    const stats: StageStats = {
      v: 1,
      job: w.job,
      ...launchField(w.launch),
      stage: w.stage,
      upMs: performance.now() - t0,
      iteration: s.iteration,
      running: s.running,
      ready: {
        F: s.forwardReady.slice(0, MAX_LISTED),
        B: s.backwardReady.slice(0, MAX_LISTED),
        W: s.weightReady.slice(0, MAX_LISTED),
      },
      inflight: s.inflight,
      limit: w.limit,
      policy: s.policy ?? '?',
      swapsPending: s.swapsPending ?? 0,
      ...w.totals,
    };
    w.bus.publish(subject(w.job, 'stats', w.stage), encodeValue(stats));
  };
  const timer = setInterval(() => void tick(), w.everyMs);
  timer.unref();
  return {
    unsubscribe: () => {
      stopped = true;
      clearInterval(timer);
    },
  };
}
