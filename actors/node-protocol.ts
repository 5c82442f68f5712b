// The node agent's subjects, names and request checks (actors/node-agent.ts has the
// protocol itself): what a launcher and an agent must agree on.

import { quoteValue } from '../base/quote';
import { TOKEN_RE } from '../base/token';
import { MAX_TIMER_MS } from '../base/clock';
import { LAUNCH_EXPECTED, LAUNCH_RE } from '../transport/envelope';
import { MAX_SUBJECT_BYTES, checkSubject } from '../transport/local-bus';

/** The shared discovery subjects of standalone agents (started by hand, for any job of their key). */
export const NODES_PREFIX = 'baton._nodes';
export const ANNOUNCE_SUBJECT = `${NODES_PREFIX}.announce`;
export const nodeSubject = (name: string) => `${NODES_PREFIX}.${name}`;

/**
 * Where a node agent is reached: its requests, its hellos and its heartbeats. A standalone
 * agent's are the shared `baton._nodes.…`; an agent started for one job (`baton node --job J`,
 * as a launcher starts its stage processes) has them under the job's own prefix,
 * `baton.<job>.node.…`, so one permission rule on `baton.<job>.>` covers them.
 */
export interface NodeSubjects {
  readonly prefix: string;
  readonly announce: string;
  request(name: string): string;
  beat(name: string): string;
}

export function nodeSubjectsUnder(prefix: string): NodeSubjects {
  return {
    prefix,
    announce: `${prefix}.announce`,
    request: (name) => `${prefix}.${name}`,
    beat: (name) => `${prefix}.beat.${name}`,
  };
}

export const STANDALONE_NODES = nodeSubjectsUnder(NODES_PREFIX);

/** The subjects of the agents started for `job`. */
export const jobNodeSubjects = (job: string): NodeSubjects => nodeSubjectsUnder(`baton.${job}.node`);

/** Where agents answer a launcher of `job` (standalone agents too): under the job's prefix. */
export const replyBox = (job: string, id: string) => `baton.${job}.node.reply.${id}`;

/** A reply subject under the job's prefix (a job name does not start with _). */
const JOB_REPLY_RE = /^baton\.[A-Za-z0-9-][A-Za-z0-9_-]*\.node\.reply\./;

/** Node names are one subject token. */
export const NODE_NAME_RE = TOKEN_RE;
/** The longest node name: its subject, baton._nodes.<name>, must fit the bus's MAX_SUBJECT_BYTES. */
export const MAX_NODE_NAME = MAX_SUBJECT_BYTES - `${NODES_PREFIX}.`.length;

/** Shortest lease a launcher may ask for (renewals travel over the bus). */
export const MIN_LEASE_MS = 1000;

/** A request an agent cannot act on as sent (its fields, its verb, a job it does not host as asked). */
export class NodeRequestError extends Error {
  override name = 'NodeRequestError';
}

/** A renew or status for a job this agent does not host. */
export class JobNotHostedError extends NodeRequestError {
  override name = 'JobNotHostedError';
}

/** A job request that carries another launch id than the hosted job's. */
export class LaunchMismatchError extends NodeRequestError {
  override name = 'LaunchMismatchError';
}

/** Longer reply subjects are refused: the server drops a connection whose command line
 * (the subject is in it) passes 4 KB. Launchers use the job name and the launch id. */
const MAX_REPLY_SUBJECT = 256;

/** Under a job's reply box prefix (baton.<job>.node.reply.), or the older shared baton._nodes.reply. */
export function isReplyPrefix(to: string): boolean {
  return to.startsWith(`${NODES_PREFIX}.reply.`) || JOB_REPLY_RE.test(to);
}

/** Where an agent may answer: a launcher's reply box (a valid subject under baton.<job>.node.reply. or baton._nodes.reply.). */
export function isReplySubject(to: unknown): to is string {
  if (typeof to !== 'string' || !isReplyPrefix(to) || to.length > MAX_REPLY_SUBJECT) return false;
  try {
    checkSubject(to, false);
    return true;
  } catch {
    return false;
  }
}

export function jobName(job: unknown): string {
  if (typeof job !== 'string') throw new NodeRequestError(`job must be a string, got ${quoteValue(job)}`);
  return job;
}

/** The fields of a host request besides its config, checked. */
export interface HostFields {
  readonly reply: string;
  readonly stages: number[];
  /** The TP rank and DP replica the stages are of, in a job of T > 1 ranks or D > 1 replicas. */
  readonly lane?: { readonly rank: number; readonly replica: number };
  readonly leaseMs?: number;
  readonly launch?: string;
}

export function hostFields(req: Record<string, unknown>): HostFields {
  // Stages no launcher can be told about could only be reached by a lease running out.
  if (!isReplySubject(req.reply))
    throw new NodeRequestError(
      `host: reply must be a subject under baton.<job>.node.reply. or ${NODES_PREFIX}.reply., got ${quoteValue(req.reply)}`,
    );
  const stages = req.stages;
  if (!Array.isArray(stages) || stages.length === 0 || !stages.every((s) => Number.isInteger(s)))
    throw new NodeRequestError(`host: stages must be a non-empty list of integers, got ${quoteValue(stages)}`);
  if (new Set(stages).size !== stages.length)
    throw new NodeRequestError(`host: stages must not repeat, got ${quoteValue(stages)}`);
  const lane = laneField(req.lane);
  const leaseMs = req.leaseMs;
  if (
    leaseMs !== undefined &&
    !(Number.isSafeInteger(leaseMs) && (leaseMs as number) >= MIN_LEASE_MS && (leaseMs as number) <= MAX_TIMER_MS)
  )
    throw new NodeRequestError(
      `host: leaseMs must be an integer from ${MIN_LEASE_MS} to ${MAX_TIMER_MS}, got ${quoteValue(leaseMs)}`,
    );
  const launch = req.launch;
  if (launch !== undefined && !(typeof launch === 'string' && LAUNCH_RE.test(launch)))
    throw new NodeRequestError(`host: launch must be ${LAUNCH_EXPECTED}, got ${quoteValue(launch)}`);
  return {
    reply: req.reply,
    stages: stages as number[],
    ...(lane ? { lane } : {}),
    ...(leaseMs !== undefined ? { leaseMs: leaseMs as number } : {}),
    ...(launch !== undefined ? { launch: launch as string } : {}),
  };
}

/** A host request's lane: absent, or a map of an integer rank and replica (checked against the job by the agent). */
function laneField(lane: unknown): { rank: number; replica: number } | undefined {
  if (lane === undefined) return undefined;
  const { rank, replica } = (typeof lane === 'object' && lane !== null ? lane : {}) as Record<string, unknown>;
  if (!Number.isInteger(rank) || !Number.isInteger(replica))
    throw new NodeRequestError(`host: lane must be a map of an integer rank and replica, got ${quoteValue(lane)}`);
  return { rank: rank as number, replica: replica as number };
}

/** A host request's lane must be one of the job's, and a job of more than one lane needs one. */
export function checkLaneOfPlan(
  plan: { ranks: number; replicas: number },
  lane: { rank: number; replica: number } | undefined,
): void {
  const wide = plan.ranks > 1 || plan.replicas > 1;
  if (!lane) {
    if (wide)
      throw new NodeRequestError(
        `host: the job has ${plan.ranks} ranks × ${plan.replicas} replicas per stage; the request must name its lane`,
      );
    return;
  }
  if (lane.rank < 0 || lane.rank >= plan.ranks || lane.replica < 0 || lane.replica >= plan.replicas)
    throw new NodeRequestError(
      `host: lane rank ${lane.rank}, replica ${lane.replica} is outside the job's ${plan.ranks} ranks × ${plan.replicas} replicas`,
    );
}
