import { strict as assert } from 'assert';
import { VirtualClock } from '../base/clock';
import { ActorRef, ActorRuntime } from '../actors/runtime';
import { GroupMember, PeerBytes, peerSubscription, takePeerMessage } from '../actors/group-peer';
import { encodeEnvelope } from '../transport/codec';
import { ENVELOPE_VERSION, Envelope } from '../transport/envelope';
import { LocalBus } from '../transport/local-bus';
import { BatonEvent } from '../stage/events';

type Peer = { readonly type: 'peer'; readonly n: number };

/** A member whose sends and events are recorded, on a virtual clock. */
function member() {
  const clock = new VirtualClock();
  const sent: unknown[] = [];
  const events: BatonEvent[] = [];
  const runtime = { clock, send: (_to: unknown, m: unknown) => sent.push(m) } as unknown as ActorRuntime;
  const m: GroupMember = { runtime, sink: (e) => events.push(e), stage: 3, name: 'tp-3r1', reason: 'tp' };
  const self = { name: 'tp-3r1' } as ActorRef<Peer | PeerBytes>;
  return { clock, sent, events, m, self };
}

const envelope = (body: Record<string, unknown>, commMs?: number) =>
  encodeEnvelope({
    v: ENVELOPE_VERSION,
    job: 'j',
    kind: 'tp',
    iteration: 0,
    mb: 0,
    chunk: 0,
    dir: 'control',
    src: 3,
    dst: 3,
    seq: 0,
    sentAt: 0,
    ...(commMs !== undefined ? { commMs } : {}),
    bytes: 0,
    tensors: [],
    body,
  });

const read = (e: Envelope): Peer | string =>
  typeof e.body?.n === 'number' ? { type: 'peer', n: e.body.n } : `no n in ${JSON.stringify(e.body)}`;

describe('a group member taking its peers’ messages', () => {
  it('takes a message it read, and a problem taking it is a reject event named by the member', () => {
    const { events, m, self } = member();
    const taken: number[] = [];
    const take = (p: Peer) => (taken.push(p.n), p.n > 1 ? `n ${p.n} is too big` : null);
    takePeerMessage(m, self, { type: 'peer', n: 1 }, read, take);
    takePeerMessage(m, self, { type: 'peer', n: 2 }, read, take);
    assert.deepEqual(taken, [1, 2]);
    assert.deepEqual(events, [
      { type: 'reject', t: 0, stage: 3, iteration: -1, reason: 'tp', detail: 'tp-3r1: n 2 is too big' },
    ]);
  });

  it('refuses bytes that do not decode or that it cannot read, naming their subject, and takes nothing', () => {
    const { sent, events, m, self } = member();
    const take = () => assert.fail('nothing is taken');
    takePeerMessage(m, self, { type: 'bytes', subject: 's.1', data: Uint8Array.from([1, 2, 3]) }, read, take);
    takePeerMessage(m, self, { type: 'bytes', subject: 's.2', data: envelope({ x: 1 }) }, read, take);
    assert.deepEqual(sent, []);
    assert.equal(events.length, 2);
    assert.match((events[0] as { detail: string }).detail, /^s\.1: /);
    assert.equal((events[1] as { detail: string }).detail, 's.2: no n in {"x":1}');
  });

  it('sends what it read to itself once the message’s communication time has passed', async () => {
    const { clock, sent, events, m, self } = member();
    takePeerMessage(m, self, { type: 'bytes', subject: 's', data: envelope({ n: 7 }, 5) }, read, () => null);
    assert.deepEqual(sent, []);
    await clock.run(() => false);
    assert.equal(clock.now(), 5);
    assert.deepEqual(sent, [{ type: 'peer', n: 7 }]);
    assert.deepEqual(events, []);
  });

  it('is sent what comes on its subject as bytes', () => {
    const { sent, m, self } = member();
    const bus = new LocalBus();
    const sub = peerSubscription(m.runtime, bus, 'baton.j.tp.3', self);
    const data = Uint8Array.from([9]);
    bus.publish('baton.j.tp.3', data);
    sub.unsubscribe();
    bus.publish('baton.j.tp.3', data);
    assert.deepEqual(sent, [{ type: 'bytes', subject: 'baton.j.tp.3', data }]);
  });
});
