// The policy actor of a job: it holds the job's arbitration policy, takes swap requests
// (from `baton policy set` over the bus, from a `--swap-at` schedule, or from this
// process), decides them (policies/swap-rules.ts), sends each accepted swap to every
// stage as a control message, and hears from each stage when it adopted it (an ack).
// Stages ask it nothing per decision: it talks to them only when a swap happens.
// It keeps the log of swaps the run's JSON reports, and answers `baton policy get`.

import { HintPolicy } from '../policies/hint';
import { PipelineShape } from '../policies/task';
import { JobPosition, decideSwap, wideJobSwapProblem } from '../policies/swap-rules';
import { isModulePath } from '../policies/registry';
import { CONSISTENCY_POLICIES } from './param-store-policy';
import { RejectTally, newRejectTally, tallyReject } from '../base/reject-tally';
import { Bus } from '../transport/bus';
import { encodeEnvelope, encodeValue } from '../transport/codec';
import { ENVELOPE_VERSION, launchField } from '../transport/envelope';
import { subject } from '../transport/subjects';
import { ActorRef, ActorRuntime } from './runtime';
import { ControlSeal, PolicyMessage, SetRequest, parsePolicyMessage } from './policy-messages';

export interface Adoption {
  readonly stage: number;
  readonly iteration: number;
  readonly tasks: number;
  /** When the ack reached the policy actor, ms on its clock. */
  readonly at: number;
}

export interface SwapLogEntry {
  readonly swap: number;
  readonly what: 'arbitration' | 'consistency';
  readonly by: string;
  /** When the request reached the policy actor: ms on its clock, and wall-clock time. */
  readonly requestedAt: number;
  readonly requestedWall: string;
  readonly from: string;
  readonly to: string;
  readonly atIteration?: number;
  readonly adopted: Adoption[];
  /** Request -> last stage's ack, ms; null until every stage adopted it. */
  latencyMs: number | null;
}

export type SetAnswer =
  | {
      readonly ok: true;
      readonly swap: number;
      readonly from: string;
      readonly to: string;
      readonly atIteration?: number;
    }
  | { readonly ok: false; readonly error: string };

export interface PolicyView {
  readonly policy: string;
  /** An asynchronous job's consistency policy in force, and the swap that brought it (null: synchronous). */
  readonly consistency: { policy: string; swap: number | null } | null;
  /** The swap that put it in force (null: the job's first policy), and when every stage had adopted it. */
  readonly swap: number | null;
  readonly sinceMs: number | null;
  readonly sinceIteration: number | null;
  readonly pending: string[];
  readonly swaps: number;
  readonly refused: number;
  readonly rejected: number;
}

export type PolicyActorMsg =
  | { readonly type: 'bytes'; readonly subject: string; readonly data: Uint8Array; readonly seal?: ControlSeal }
  | {
      readonly type: 'set';
      readonly request: SetRequest;
      readonly reply?: (a: SetAnswer) => void;
      readonly onAdopted?: (e: SwapLogEntry) => void;
    }
  | { readonly type: 'view'; readonly reply: (v: PolicyView) => void };

export interface PolicyActorWiring {
  readonly runtime: ActorRuntime;
  readonly bus: Bus;
  readonly job: string;
  readonly shape: PipelineShape;
  readonly initial: HintPolicy;
  /** The launch id of the job's messages (absent on the in-process bus). */
  readonly launch?: string;
  readonly position: () => JobPosition;
  /** A name or module path as a policy; throws (an InputError) for one it refuses. */
  readonly resolve: (name: string) => HintPolicy;
  /** The consistency policy of an asynchronous job (absent: a synchronous one, which has none). */
  readonly consistency?: string;
}

interface PolicyState {
  /** The last accepted policy: the one stages will be on once every swap is adopted. */
  tail: HintPolicy;
  /** The last accepted consistency policy (asynchronous jobs). */
  tailConsistency: string | null;
  consistencyInForce: { policy: string; swap: number | null } | null;
  /** The policy every stage has adopted, and the swap that brought it. */
  inForce: { policy: string; swap: number | null; sinceMs: number | null; sinceIteration: number | null };
  readonly log: SwapLogEntry[];
  readonly watchers: Map<number, ((e: SwapLogEntry) => void)[]>;
  refused: number;
  readonly rejects: RejectTally;
  seq: number;
}

function sendSwap(w: PolicyActorWiring, s: PolicyState, e: SwapLogEntry): void {
  for (let st = 0; st < w.shape.stages; st++)
    w.bus.publish(
      subject(w.job, 'control', st),
      encodeEnvelope({
        v: ENVELOPE_VERSION,
        job: w.job,
        kind: 'control',
        iteration: e.atIteration ?? -1,
        mb: -1,
        chunk: -1,
        dir: 'control',
        src: -1,
        dst: st,
        seq: s.seq++,
        sentAt: w.runtime.clock.now(),
        bytes: 0,
        tensors: [],
        body:
          e.what === 'consistency'
            ? { verb: 'swap', swap: e.swap, consistency: e.to }
            : {
                verb: 'swap',
                swap: e.swap,
                policy: e.to,
                ...(e.atIteration !== undefined ? { atIteration: e.atIteration } : {}),
              },
        ...launchField(w.launch),
      }),
    );
}

function logSwap(
  w: PolicyActorWiring,
  s: PolicyState,
  m: Extract<PolicyActorMsg, { type: 'set' }>,
  e: Omit<SwapLogEntry, 'swap' | 'requestedAt' | 'requestedWall' | 'adopted' | 'latencyMs' | 'by'>,
): SetAnswer {
  const entry: SwapLogEntry = {
    swap: s.log.length,
    by: m.request.by,
    requestedAt: w.runtime.clock.now(),
    requestedWall: new Date().toISOString(),
    ...e,
    adopted: [],
    latencyMs: null,
  };
  s.log.push(entry);
  if (m.onAdopted) s.watchers.set(entry.swap, [m.onAdopted]);
  sendSwap(w, s, entry);
  return { ok: true, swap: entry.swap, from: entry.from, to: entry.to, atIteration: entry.atIteration };
}

function onConsistency(w: PolicyActorWiring, s: PolicyState, m: Extract<PolicyActorMsg, { type: 'set' }>): SetAnswer {
  const to = m.request.policy;
  const refuse = (error: string): SetAnswer => {
    s.refused++;
    return { ok: false, error };
  };
  if (s.tailConsistency === null)
    return refuse('a consistency swap is for an asynchronous job; this one is synchronous');
  if (!(CONSISTENCY_POLICIES as readonly string[]).includes(to))
    return refuse(`unknown consistency policy ${JSON.stringify(to)}; known: ${CONSISTENCY_POLICIES.join(', ')}`);
  const from = s.tailConsistency;
  s.tailConsistency = to;
  return logSwap(w, s, m, { what: 'consistency', from, to });
}

function onSet(w: PolicyActorWiring, s: PolicyState, m: Extract<PolicyActorMsg, { type: 'set' }>): SetAnswer {
  const { request } = m;
  const wide = wideJobSwapProblem(w.position());
  if (wide !== null) {
    s.refused++;
    return { ok: false, error: wide };
  }
  if (request.what === 'consistency') return onConsistency(w, s, m);
  let to: HintPolicy;
  try {
    to = w.resolve(request.policy);
  } catch (err) {
    s.refused++;
    return { ok: false, error: (err as Error).message };
  }
  const d = decideSwap(s.tail, to, w.shape, w.position(), { atIteration: request.atIteration });
  if (!d.accepted) {
    s.refused++;
    return { ok: false, error: d.reason };
  }
  const from = s.tail.name;
  s.tail = to;
  // A module's policy is sent, and logged, by its path: each stage loads it.
  return logSwap(w, s, m, {
    what: 'arbitration',
    from,
    to: isModulePath(request.policy) ? request.policy : to.name,
    ...(d.atIteration !== undefined ? { atIteration: d.atIteration } : {}),
  });
}

function onAck(w: PolicyActorWiring, s: PolicyState, m: Extract<PolicyMessage, { verb: 'ack' }>): string | null {
  if (w.launch !== undefined && m.launch !== w.launch) return `ack of launch ${String(m.launch)}, this is ${w.launch}`;
  if (m.stage >= w.shape.stages) return `ack from stage ${m.stage} of a ${w.shape.stages}-stage job`;
  const e = s.log[m.swap];
  if (!e) return `ack of swap ${m.swap}, which was never made`;
  if (e.adopted.some((a) => a.stage === m.stage)) return `duplicate ack of swap ${m.swap} from stage ${m.stage}`;
  const at = w.runtime.clock.now();
  e.adopted.push({ stage: m.stage, iteration: m.iteration, tasks: m.tasks, at });
  if (e.adopted.length === w.shape.stages) {
    e.latencyMs = at - e.requestedAt;
    if (e.what === 'consistency') s.consistencyInForce = { policy: e.to, swap: e.swap };
    else
      s.inForce = {
        policy: e.to,
        swap: e.swap,
        sinceMs: at,
        sinceIteration: Math.max(...e.adopted.map((a) => a.iteration)),
      };
    for (const f of s.watchers.get(e.swap) ?? []) f(e);
    s.watchers.delete(e.swap);
  }
  return null;
}

function view(s: PolicyState): PolicyView {
  return {
    ...s.inForce,
    consistency: s.consistencyInForce,
    pending: s.log.filter((e) => e.latencyMs === null).map((e) => `${e.swap}: ${e.from} -> ${e.to}`),
    swaps: s.log.length,
    refused: s.refused,
    rejected: s.rejects.count,
  };
}

function onBytes(w: PolicyActorWiring, s: PolicyState, subj: string, data: Uint8Array, seal?: ControlSeal): void {
  const m = parsePolicyMessage(w.job, subj, data, seal);
  if (typeof m === 'string') {
    tallyReject(s.rejects, `${subj.slice(0, 200)}: ${m}`);
    return;
  }
  const answer = (replyTo: string | undefined, v: Record<string, unknown>) => {
    if (replyTo) w.bus.publish(replyTo, encodeValue(v));
  };
  if (m.verb === 'ack') {
    const problem = onAck(w, s, m);
    if (problem) tallyReject(s.rejects, `${subj}: ${problem}`);
  } else if (m.verb === 'get') answer(m.replyTo, { verb: 'policy', ...view(s), log: s.log.slice(-20) });
  else {
    const onAdopted = (e: SwapLogEntry) => answer(m.replyTo, { verb: 'adopted', ...e });
    const a = onSet(w, s, { type: 'set', request: m, onAdopted });
    answer(m.replyTo, { verb: 'answer', ...a });
  }
}

export interface PolicyActor {
  readonly ref: ActorRef<PolicyActorMsg>;
  /** The swaps so far (the actor's own log: read it once the job has ended). */
  readonly log: readonly SwapLogEntry[];
  readonly rejects: RejectTally;
  view(): PolicyView;
}

export function spawnPolicyActor(w: PolicyActorWiring): PolicyActor {
  const s: PolicyState = {
    tail: w.initial,
    tailConsistency: w.consistency ?? null,
    consistencyInForce: w.consistency !== undefined ? { policy: w.consistency, swap: null } : null,
    inForce: { policy: w.initial.name, swap: null, sinceMs: null, sinceIteration: null },
    log: [],
    watchers: new Map(),
    refused: 0,
    rejects: newRejectTally(),
    seq: 0,
  };
  const ref = w.runtime.spawn<PolicyState, PolicyActorMsg>('policy', s, (st, msg) => {
    if (msg.type === 'bytes') onBytes(w, st, msg.subject, msg.data, msg.seal);
    else if (msg.type === 'view') msg.reply(view(st));
    else {
      const a = onSet(w, st, msg);
      msg.reply?.(a);
    }
    return st;
  });
  return { ref, log: s.log, rejects: s.rejects, view: () => view(s) };
}
