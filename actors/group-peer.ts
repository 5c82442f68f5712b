// What a group member (bus-all-reduce.ts's, tp-group.ts's) does with its peers' messages:
// their bytes come off the bus, are decoded, read and held for their communication time
// (receiver.ts afterComm), then taken in the member's turn. One refused at any step is a
// reject event of the stage, never thrown.

import { decodeEnvelope } from '../transport/codec';
import { Bus, Subscription } from '../transport/bus';
import { Envelope } from '../transport/envelope';
import { EventSink } from '../stage/events';
import { afterComm } from './receiver';
import { ActorRef, ActorRuntime } from './runtime';

export type PeerBytes = { readonly type: 'bytes'; readonly subject: string; readonly data: Uint8Array };

export interface GroupMember {
  readonly runtime: ActorRuntime;
  readonly sink: EventSink;
  readonly stage: number;
  /** The member actor's name: the detail of a refused message it read starts with it. */
  readonly name: string;
  /** The reason of its reject events. */
  readonly reason: 'tp' | 'all-reduce';
}

/**
 * A peer's message to the member `self`: bytes are read by `read` (a string is the problem
 * that refuses them) and sent to `self` after their communication time; a message so read is
 * taken by `take` (a string: the problem that refuses it).
 */
export function takePeerMessage<P extends { readonly type: string }>(
  m: GroupMember,
  self: ActorRef<P | PeerBytes>,
  msg: P | PeerBytes,
  read: (e: Envelope) => P | string,
  take: (p: P) => string | null,
): void {
  const reject = (detail: string) =>
    m.sink({ type: 'reject', t: m.runtime.clock.now(), stage: m.stage, iteration: -1, reason: m.reason, detail });
  if (!isBytes(msg)) {
    const problem = take(msg);
    if (problem) reject(`${m.name}: ${problem}`);
    return;
  }
  let e: Envelope;
  try {
    e = decodeEnvelope(msg.data);
  } catch (err) {
    return reject(`${msg.subject}: ${(err as Error).message}`);
  }
  const p = read(e);
  if (typeof p === 'string') return reject(`${msg.subject}: ${p}`);
  afterComm(m.runtime.clock, e, m.runtime.clock.now(), () => m.runtime.send(self, p));
}

function isBytes<P extends { readonly type: string }>(msg: P | PeerBytes): msg is PeerBytes {
  return msg.type === 'bytes';
}

/** The member's subscription to its subject: what comes there is sent to it as bytes. */
export function peerSubscription(
  runtime: ActorRuntime,
  bus: Bus,
  subject: string,
  member: ActorRef<PeerBytes>,
): Subscription {
  return bus.subscribe(subject, (subj, data) => runtime.send(member, { type: 'bytes', subject: subj, data }));
}
