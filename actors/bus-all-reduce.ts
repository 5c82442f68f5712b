// models/all-reduce.ts's AllReduce over the bus, for the members of one group: the ranks of a
// tensor-parallel group (subject kind tp-reduce) or the replicas of a stage (dp-reduce). Each
// member publishes its array to every peer's subject and sums the T arrays in member order
// once it has them all, so every member gets the same bits whatever order they arrived in.
// A group sums float32 arrays (TP activations and gradients) or, made with dtype
// 'float64', float64 ones (the replicas' unrounded gradient sums); a part of the other
// dtype is refused.
// On the virtual clock a part is held for the cost the wiring draws (latency + bytes /
// bandwidth of the collective), as activations are. One actor per member owns the pending
// parts; a stranger's part is refused and counted.

import { AllReduce, Floats, sumInOrder } from '../models/all-reduce';
import { quoteValue } from '../base/quote';
import { Bus, Subscription } from '../transport/bus';
import { encodeEnvelope } from '../transport/codec';
import { ENVELOPE_VERSION, Envelope, launchField } from '../transport/envelope';
import { EventSink } from '../stage/events';
import { PeerBytes, peerSubscription, takePeerMessage } from './group-peer';
import { ActorRef, ActorRuntime } from './runtime';

/** Collectives a member keeps open at once: more is a peer misbehaving. */
export const MAX_OPEN_COLLECTIVES = 4096;
const MAX_KEY = 200;

export interface AllReduceWiring {
  readonly runtime: ActorRuntime;
  readonly bus: Bus;
  readonly job: string;
  readonly stage: number;
  /** The group's size and this member's index in it. */
  readonly members: number;
  readonly member: number;
  /** Where member m listens. */
  readonly subjectOf: (member: number) => string;
  readonly name: string;
  readonly sink: EventSink;
  /** Emulated ms a part of `bytes` takes (0 on the real clock: the bus's own time). */
  readonly costMs?: (key: string, bytes: number) => number;
  /** Emulated bytes a part stands for (default: its real bytes). */
  readonly bytesOf?: (key: string, data: Floats) => number;
  /** The arrays the group sums (default float32): float64 for A = Float64Array. */
  readonly dtype?: 'float32' | 'float64';
  readonly launch?: string;
}

type Msg =
  | {
      readonly type: 'contribute';
      readonly key: string;
      readonly data: Floats;
      readonly resolve: (s: Floats) => void;
      readonly reject: (e: Error) => void;
    }
  | PeerBytes
  | { readonly type: 'part'; readonly key: string; readonly member: number; readonly data: Floats };

interface Pending {
  parts: (Floats | null)[];
  resolve?: (s: Floats) => void;
  reject?: (e: Error) => void;
}

type Part = Extract<Msg, { type: 'part' }>;

/** The part `e` carries, or the reason it is refused. */
function partOf(w: AllReduceWiring, e: Envelope): Part | string {
  const { key, member } = (e.body ?? {}) as { key?: unknown; member?: unknown };
  if (e.job !== w.job || e.src !== w.stage || e.dst !== w.stage)
    return `not a part of stage ${w.stage} of job ${w.job}`;
  if (w.launch !== undefined && e.launch !== w.launch) return `a part of another launch (${quoteValue(e.launch)})`;
  if (typeof key !== 'string' || key.length === 0 || key.length > MAX_KEY)
    return `key ${quoteValue(key)} is not a collective's key`;
  if (!Number.isInteger(member) || (member as number) < 0 || (member as number) >= w.members || member === w.member)
    return `member ${quoteValue(member)} is not a peer of member ${w.member} of ${w.members}`;
  const t = e.tensors[0];
  const dtype = w.dtype ?? 'float32';
  if (e.tensors.length !== 1 || t.dtype !== dtype) return `a part carries one ${dtype} tensor`;
  // The part's data may be a view into the bus's buffer: keep a copy.
  return { type: 'part', key, member: member as number, data: (t.data as Floats).slice() };
}

function take(
  w: AllReduceWiring,
  open: Map<string, Pending>,
  key: string,
  member: number,
  data: Floats,
): string | null {
  let p = open.get(key);
  if (!p) {
    if (open.size >= MAX_OPEN_COLLECTIVES) return `more than ${MAX_OPEN_COLLECTIVES} collectives open`;
    open.set(key, (p = { parts: new Array<Floats | null>(w.members).fill(null) }));
  }
  if (p.parts[member] !== null) return `second part of member ${member} for ${quoteValue(key)}`;
  const first = p.parts.find((x) => x !== null);
  if (first && first.length !== data.length)
    return `part of member ${member} for ${quoteValue(key)} has ${data.length} values, others ${first.length}`;
  p.parts[member] = data;
  if (p.resolve && p.parts.every((x) => x !== null)) {
    open.delete(key);
    p.resolve(sumInOrder(p.parts as Floats[]));
  }
  return null;
}

function publishPart(w: AllReduceWiring, seq: number, key: string, data: Floats): void {
  const now = w.runtime.clock.now();
  const bytes = w.bytesOf ? w.bytesOf(key, data) : data.byteLength;
  const commMs = w.costMs ? w.costMs(key, bytes) : 0;
  for (let m = 0; m < w.members; m++) {
    if (m === w.member) continue;
    w.bus.publish(
      w.subjectOf(m),
      encodeEnvelope({
        v: ENVELOPE_VERSION,
        job: w.job,
        kind: 'all-reduce',
        iteration: -1,
        mb: -1,
        chunk: -1,
        dir: 'control',
        src: w.stage,
        dst: w.stage,
        seq: seq + m,
        sentAt: now,
        ...(commMs > 0 ? { commMs } : {}),
        bytes,
        tensors: [{ dtype: w.dtype ?? 'float32', shape: [data.length], data }],
        body: { key, member: w.member },
        ...launchField(w.launch),
      }),
    );
  }
}

/**
 * The member's collective, twice: `allReduce` (models/all-reduce.ts's promise) and `reduce`,
 * which calls back inside the member actor's turn. On the virtual clock a caller that must
 * send something when the sum is there uses `reduce`: the clock counts its send as work
 * before it could move on, where a promise's continuation runs a few microtasks later.
 */
export function spawnBusAllReduce<A extends Floats = Float32Array>(
  w: AllReduceWiring,
): {
  allReduce: AllReduce<A>;
  reduce: (key: string, data: A, then: (sum: A | Error) => void) => void;
  subscription: Subscription;
} {
  const { runtime } = w;
  const member = { runtime, sink: w.sink, stage: w.stage, name: w.name, reason: 'all-reduce' } as const;
  const state = { open: new Map<string, Pending>(), seq: 0 };
  const actor: ActorRef<Msg> = runtime.spawn<typeof state, Msg>(w.name, state, (s, msg, self) => {
    if (msg.type === 'contribute') {
      const p = s.open.get(msg.key);
      if (p?.resolve) {
        msg.reject(new Error(`${w.name}: all-reduce ${quoteValue(msg.key)} contributed twice`));
        return s;
      }
      publishPart(w, s.seq, msg.key, msg.data);
      s.seq += w.members;
      const problem = take(w, s.open, msg.key, w.member, msg.data);
      if (problem) {
        msg.reject(new Error(`${w.name}: ${problem}`));
        return s;
      }
      const still = s.open.get(msg.key)!;
      if (still.parts.every((x) => x !== null)) {
        s.open.delete(msg.key);
        msg.resolve(sumInOrder(still.parts as Floats[]));
      } else Object.assign(still, { resolve: msg.resolve, reject: msg.reject });
      return s;
    }
    const read = (e: Envelope) => partOf(w, e);
    takePeerMessage<Part>(member, self, msg, read, (p) => take(w, s.open, p.key, p.member, p.data));
    return s;
  });
  const subscription = peerSubscription(runtime, w.bus, w.subjectOf(w.member), actor);
  // Not held as work on the virtual clock: the parts it waits for come on its timers.
  const reduce = (key: string, data: A, then: (sum: A | Error) => void) =>
    runtime.send(actor, {
      type: 'contribute',
      key,
      data: data.slice(),
      resolve: then as (s: Floats) => void,
      reject: then,
    });
  const allReduce: AllReduce<A> = (key, data) =>
    new Promise<A>((resolve, reject) =>
      reduce(key, data, (sum) => (sum instanceof Error ? reject(sum) : resolve(sum))),
    );
  return { allReduce, reduce, subscription };
}
