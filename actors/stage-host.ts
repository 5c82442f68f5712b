// What a node agent is given to host a job's stages (job/node-host.ts makes it from a
// job config): the plan of one host request, and what wiring a stage yields. Types only:
// the agent (node-agent.ts) acts on them.

import { Bus, Subscription } from '../transport/bus';
import { EventSink } from '../stage/events';
import { ActorRuntime, ActorRef } from './runtime';
import { StageActorMsg } from './stage';

/** One stage as the agent keeps it: its actor, its bus subscriptions and its compute. */
export interface HostedStage {
  readonly stage: ActorRef<StageActorMsg>;
  readonly subscriptions: Subscription[];
  readonly compute: { dispose?(): void; snapshotNow?(): Promise<void> };
}

/** What a host request's config means on this agent, checked as far as it can be without
 * the agent's own state (job/node-host.ts makes it from a job config). */
export interface StagePlan {
  readonly job: string;
  /** P: the pipeline's stages (a request's stages must be among 0..P-1). */
  readonly stages: number;
  /** T ranks per stage and D replicas: a request for a job with more than one must name its lane. */
  readonly ranks: number;
  readonly replicas: number;
  /** The checks that come after the agent's own (the workload profile). */
  check(): void;
  /** What must be loaded before the stages are wired (the tfjs backend of real compute). */
  prepare(): Promise<void>;
  wire(o: {
    runtime: ActorRuntime;
    bus: Bus;
    stage: number;
    sink: EventSink;
    launch?: string;
    lane?: { rank: number; replica: number };
  }): HostedStage;
  /** Answer the job's name claims while the agent hosts it. */
  answerClaims(bus: Bus, info: Record<string, unknown>): Subscription;
}

/** Turns a host request's config into a plan, or throws the config's error (its name
 * tells the launcher whether it is bad input). `allowedFiles`: the real paths of the files and
 * directories the job may name (the agent's --allow-files); `recovery`: the request's recovery
 * field (job/stage-recovery.ts), the stages' state to start from. */
export type StageHost = (config: unknown, o: { allowedFiles: readonly string[]; recovery?: unknown }) => StagePlan;
