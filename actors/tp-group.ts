// The tensor-parallel group, one member actor per rank: the scalar all-gather of RRFP's
// coordination round (§4.2, appendix D). The rank's stage actor hands it a proposal; the
// member publishes it to every peer's tp subject and collects the peers' proposals of the
// same round; once it has all T it tells the stage every candidate, in rank order, and when
// the last peer's proposal came in (its bytes, on this member's clock: on the virtual clock
// and in one process that is when the peer sent it; over NATS it includes the transit, which
// cannot be told apart without comparing two machines' clocks), and the stage decides
// (stage/tp-coordination.ts). A peer's proposal for a round this rank has not
// opened yet is told to the stage too (a deferred rank then retries). Proposals are held
// for their drawn message time, as activations are (receiver.ts commHoldMs), so on the
// virtual clock a round costs what its messages cost. A stranger's message is refused and
// counted, never taken.

import { quoteValue } from '../base/quote';
import { PipelineShape, Task, formatTask, parseTask, taskProblem } from '../policies/task';
import { Bus, Subscription } from '../transport/bus';
import { encodeEnvelope } from '../transport/codec';
import { ENVELOPE_VERSION, Envelope, launchField } from '../transport/envelope';
import { Lane, laneName, laneSubject } from '../transport/lanes';
import { EventSink } from '../stage/events';
import { StageMsg } from '../stage/stage-state';
import { PeerBytes, peerSubscription, takePeerMessage } from './group-peer';
import { ActorRef, ActorRuntime } from './runtime';

export type TpGroupMsg =
  | { readonly type: 'propose'; readonly round: number; readonly iteration: number; readonly task: Task }
  | PeerBytes
  | {
      readonly type: 'peer';
      readonly round: number;
      readonly rank: number;
      readonly task: Task;
      /** When its bytes reached this member, before their emulated message time (this member's clock). */
      readonly at: number;
    };

export interface TpGroupWiring {
  readonly runtime: ActorRuntime;
  readonly bus: Bus;
  readonly job: string;
  readonly stage: number;
  readonly lane: Lane;
  readonly shape: PipelineShape;
  /** Tells the rank's stage actor (the group's answers, a peer's new round). */
  readonly tell: (msg: StageMsg) => void;
  readonly sink: EventSink;
  /** Emulated ms a proposal takes to reach a peer (0 on the real clock: the bus's own time). */
  readonly messageMs: (round: number, toRank: number) => number;
  readonly launch?: string;
}

interface TpGroupState {
  /** Rounds this rank has proposed in (its next is `own`). */
  own: number;
  /** Candidates of the rounds not yet complete, by round, in rank order, and when the last peer's came in. */
  rounds: Map<number, { slots: (Task | null)[]; peersIn: number }>;
  /** The lowest round not yet answered. */
  answered: number;
  seq: number;
}

type PeerProposal = Extract<TpGroupMsg, { type: 'peer' }>;

/** The peer proposal `data` carries, or the reason it is refused. */
function peerProposal(w: TpGroupWiring, e: Envelope): PeerProposal | string {
  const b = e.body ?? {};
  const { round, rank } = b as { round?: unknown; rank?: unknown };
  if (e.kind !== 'tp' || e.job !== w.job || e.src !== w.stage || e.dst !== w.stage)
    return `not a proposal of stage ${w.stage} of job ${w.job} (kind ${quoteValue(e.kind)}, stage ${e.src})`;
  if (w.launch !== undefined && e.launch !== w.launch) return `proposal of another launch (${quoteValue(e.launch)})`;
  if (!Number.isInteger(rank) || (rank as number) < 0 || (rank as number) >= w.lane.ranks || rank === w.lane.rank)
    return `proposal from rank ${quoteValue(rank)}, not a peer of rank ${w.lane.rank} of ${w.lane.ranks}`;
  if (!Number.isSafeInteger(round) || (round as number) < 0) return `round ${quoteValue(round)} is not a round number`;
  let t: Task;
  try {
    t = parseTask(String(b.task));
  } catch {
    return `task ${quoteValue(b.task)} is not a task`;
  }
  const problem = taskProblem(t, w.shape);
  if (problem !== null) return `task ${formatTask(t)} is not a task of this pipeline (${problem})`;
  return { type: 'peer', round: round as number, rank: rank as number, task: t, at: w.runtime.clock.now() };
}

function record(w: TpGroupWiring, s: TpGroupState, round: number, rank: number, t: Task, at: number): string | null {
  // A peer can be at most one round ahead of this rank: its next round needs this rank's proposal.
  if (round < s.answered || round > s.own)
    return `round ${round} is not open (answered up to ${s.answered - 1}, own ${s.own})`;
  let r = s.rounds.get(round);
  if (!r) s.rounds.set(round, (r = { slots: new Array<Task | null>(w.lane.ranks).fill(null), peersIn: -Infinity }));
  const { slots } = r;
  if (slots[rank] !== null) return `second proposal of rank ${rank} in round ${round}`;
  slots[rank] = t;
  if (rank !== w.lane.rank) {
    r.peersIn = Math.max(r.peersIn, at);
    if (round >= s.own) w.tell({ type: 'tp-peer', round });
  }
  if (slots.every((x) => x !== null)) {
    s.rounds.delete(round);
    s.answered = round + 1;
    w.tell({ type: 'tp-result', round, candidates: slots as Task[], peersIn: r.peersIn });
  }
  return null;
}

function publishProposal(w: TpGroupWiring, s: TpGroupState, msg: Extract<TpGroupMsg, { type: 'propose' }>): void {
  const now = w.runtime.clock.now();
  for (let r = 0; r < w.lane.ranks; r++) {
    if (r === w.lane.rank) continue;
    const commMs = w.messageMs(msg.round, r);
    const data = encodeEnvelope({
      v: ENVELOPE_VERSION,
      job: w.job,
      kind: 'tp',
      iteration: msg.iteration,
      mb: msg.task.mb,
      chunk: msg.task.chunk,
      dir: 'control',
      src: w.stage,
      dst: w.stage,
      seq: s.seq++,
      sentAt: now,
      ...(commMs > 0 ? { commMs } : {}),
      bytes: 0,
      tensors: [],
      body: { round: msg.round, rank: w.lane.rank, task: formatTask(msg.task) },
      ...launchField(w.launch),
    });
    w.bus.publish(laneSubject(w.job, 'tp', w.stage, { ...w.lane, rank: r }), data);
  }
}

export function spawnTpGroupMember(w: TpGroupWiring): { member: ActorRef<TpGroupMsg>; subscription: Subscription } {
  const { runtime, sink } = w;
  const name = `tp-${laneName(w.stage, w.lane)}`;
  const peers = { runtime, sink, stage: w.stage, name, reason: 'tp' } as const;
  const initial: TpGroupState = { own: 0, rounds: new Map(), answered: 0, seq: 0 };
  const member = runtime.spawn<TpGroupState, TpGroupMsg>(name, initial, (s, msg, self) => {
    if (msg.type === 'propose') {
      if (msg.round !== s.own) throw new Error(`${name}: stage proposed in round ${msg.round}, expected ${s.own}`);
      publishProposal(w, s, msg);
      s.own++;
      const problem = record(w, s, msg.round, w.lane.rank, msg.task, runtime.clock.now());
      if (problem) throw new Error(`${name}: ${problem}`);
      return s;
    }
    const read = (e: Envelope) => peerProposal(w, e);
    takePeerMessage<PeerProposal>(peers, self, msg, read, (p) => record(w, s, p.round, p.rank, p.task, p.at));
    return s;
  });
  const subscription = peerSubscription(runtime, w.bus, laneSubject(w.job, 'tp', w.stage, w.lane), member);
  return { member, subscription };
}
