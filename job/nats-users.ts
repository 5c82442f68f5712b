// The NATS users of one job and what each may publish and subscribe to, for a server's
// accounts block (transport/nats-server-config.ts): the launcher everything of its job
// (baton.<job>.>); a node agent only what the stages it hosts use — its stages' inboxes
// and control to read, its peers' inboxes and its own report, trace and stats subjects to
// write, its requests, hellos, heartbeats and answers. The peers a stage sends activations
// and gradients to come from the runtime's own routing over the job's P stages and V chunks
// (policies/task.ts stageRoutes: forwardSuccessor, backwardSuccessor), so an interleaved
// job's wrap from the last stage to stage 0 is allowed as the runtime takes it. Nothing else on the server: not
// another job's subjects, not a peer stage's inbox to read. Every user may take replies on
// _INBOX.> and answer a request it got (allow_responses), so request/reply works.
//
// Used for the nats-server a launcher starts (cli/run-once.ts) and by `baton auth init`
// for a server an operator runs (cli/auth-init.ts).

import { randomBytes } from 'crypto';
import type { NatsUser } from '../transport/nats-server-config';
import { NodeSubjects, STANDALONE_NODES, jobNodeSubjects, replyBox } from '../actors/node-agent';
import { subject } from '../transport/subjects';
import { claimSubject } from './job-claim';
import { assignBlocks, assignStages } from './distributed-options';
import { resendPeers } from '../actors/resend';
import type { JobConfig } from './config';
import { PipelineShape, stageRoutes } from '../policies/task';
import { STAGE_INBOX_KINDS } from './wire-stage';

export type { NatsUser } from '../transport/nats-server-config';

/** A fresh password: 32 bytes of randomness, base64url (safe inside a nats:// URL). */
export const newPassword = (): string => randomBytes(32).toString('base64url');

/** A stage subject with and without its lanes (`baton.J.activation.2` and `baton.J.activation.2.>`). */
const bothForms = (s: string): string[] => [s, `${s}.>`];

const INBOX = '_INBOX.>';

/** Everything of `job`: what its launcher (and a `baton tap` of the job's owner) uses. */
export function launcherUser(job: string, user: string, password: string): NatsUser {
  return { user, password, publish: [`baton.${job}.>`], subscribe: [`baton.${job}.>`, INBOX] };
}

/** The pipeline a job's routing depends on: P stages × V chunks (interleaved virtual stages). */
export type RouteShape = Pick<PipelineShape, 'stages' | 'chunks'>;

/** What a node agent named `name`, reached on `at`, hosting `stages` of a job of `shape`, uses. */
export function nodeUser(
  o: { job: string; name: string; stages: readonly number[]; shape: RouteShape; at: NodeSubjects },
  user: string,
  password: string,
): NatsUser {
  const { job, name, at } = o;
  const publish = new Set<string>([
    subject(job, 'report'),
    `${replyBox(job, '*')}`,
    `${claimSubject(job)}.reply.*`,
    at.announce,
    at.beat(name),
    // A standalone agent asks on its own subject whether another agent has its name.
    at.request(name),
  ]);
  const subscribe = new Set<string>([at.request(name), at.announce, claimSubject(job), INBOX]);
  for (const s of o.stages) {
    for (const kind of STAGE_INBOX_KINDS) bothForms(subject(job, kind, s)).forEach((x) => subscribe.add(x));
    for (const kind of ['tp', 'tp-reduce', 'dp-reduce'] as const) {
      subscribe.add(`${subject(job, kind, s)}.>`);
      publish.add(`${subject(job, kind, s)}.>`);
    }
    for (const kind of ['trace', 'stats'] as const) bothForms(subject(job, kind, s)).forEach((x) => publish.add(x));
    // Recovery: its state every --state-every N flushes (job/state-keeper.ts); its neighbours' resends of lost messages (actors/resend.ts).
    publish.add(subject(job, 'state', s));
    subscribe.add(subject(job, 'resend', s));
    for (const peer of resendPeers(s, o.shape.stages)) publish.add(subject(job, 'resend', peer));
    const routes = stageRoutes(s, o.shape);
    for (const kind of ['activation', 'gradient'] as const)
      for (const peer of routes[kind]) bothForms(subject(job, kind, peer)).forEach((x) => publish.add(x));
  }
  return { user, password, publish: [...publish], subscribe: [...subscribe] };
}

/**
 * The users of a job whose launcher starts its own server and the stage processes `names`,
 * which host the blocks the launcher deals them (job/distributed-options.ts assignBlocks: one
 * stage each, and in a wide job one per stage of each lane). A wide job's stage process may
 * use its stage's subjects of every lane (`….<stage>.>`): its peers' ranks and replicas.
 */
export function ownServerUsers(
  cfg: Pick<JobConfig, 'job' | 'stages' | 'chunks' | 'tp' | 'dp'>,
  names: readonly string[],
): { launcher: NatsUser; stages: NatsUser[] } {
  const { job } = cfg;
  const shape = { stages: cfg.stages, chunks: cfg.chunks };
  const at = jobNodeSubjects(job);
  const blocks = names.length > 0 ? assignBlocks(cfg, names.length) : [];
  return {
    launcher: launcherUser(job, 'launcher', newPassword()),
    stages: names.map((name, i) =>
      nodeUser({ job, name, stages: blocks[i]?.stages ?? [], shape, at }, `stage${i}`, newPassword()),
    ),
  };
}

/** The stages each of `nodes` hosts in a `stages`-stage job (as a launcher deals them). */
export function stagesOfNodes(stages: number, nodes: readonly string[]): Map<string, number[]> {
  const blocks = assignStages(stages, nodes.length);
  return new Map(nodes.map((n, i) => [n, blocks[i] ?? []]));
}

/**
 * The users of `job` on a server an operator runs (`baton auth init`): a launcher that
 * reaches the standalone agents `nodes` on the shared subjects, and each agent, which may
 * host its block of the `shape.stages` stages, each with its `shape.chunks` chunks. User
 * names are `<job>-launcher` and `<job>-<node>`.
 */
export function sharedServerUsers(
  job: string,
  nodes: readonly string[],
  shape: RouteShape,
): { launcher: NatsUser; nodes: NatsUser[] } {
  const at = STANDALONE_NODES;
  const base = launcherUser(job, `${job}-launcher`, newPassword());
  const launcher: NatsUser = {
    ...base,
    // $SRV.>: the NATS services API through which `--nodes discover` finds agents (job/node-service.ts).
    publish: [
      ...(base.publish ?? []),
      ...nodes.map((n) => at.request(n)),
      '$SRV.>',
      ...nodes.map((n) => `${at.request(n)}.>`),
    ],
    subscribe: [...(base.subscribe ?? []), at.announce, ...nodes.map((n) => at.beat(n))],
  };
  const blocks = stagesOfNodes(shape.stages, nodes);
  return {
    launcher,
    nodes: nodes.map((name) => {
      const u = nodeUser({ job, name, stages: blocks.get(name) ?? [], shape, at }, `${job}-${name}`, newPassword());
      // A hand-started agent also serves the NATS services API ($SRV.…, <request subject>.hosting).
      return { ...u, subscribe: [...(u.subscribe ?? []), '$SRV.>', `${at.request(name)}.>`] };
    }),
  };
}
