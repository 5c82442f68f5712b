import { strict as assert } from 'assert';
import {
  BusClosedError,
  InvalidSubjectError,
  LocalBus,
  MAX_SUBJECT_BYTES,
  subjectMatches,
} from '../transport/local-bus';

const bytes = (...xs: number[]) => Uint8Array.from(xs);

describe('LocalBus', () => {
  it('delivers to an exact subscriber synchronously and passes the same bytes without copying', () => {
    const bus = new LocalBus();
    const got: Array<[string, Uint8Array]> = [];
    bus.subscribe('baton.j.activation.1', (s, d) => got.push([s, d]));
    const msg = bytes(1, 2, 3);
    bus.publish('baton.j.activation.1', msg);
    assert.equal(got.length, 1);
    assert.equal(got[0][0], 'baton.j.activation.1');
    assert.equal(got[0][1], msg);
  });

  it('does not deliver to subscribers of other subjects', () => {
    const bus = new LocalBus();
    let n = 0;
    bus.subscribe('baton.j.activation.1', () => n++);
    bus.publish('baton.j.activation.2', bytes(1));
    bus.publish('baton.j.activation', bytes(1));
    bus.publish('baton.j.activation.1.0', bytes(1));
    assert.equal(n, 0);
  });

  it('matches * to exactly one token and > to one or more trailing tokens', () => {
    const m = (p: string, s: string) => subjectMatches(p.split('.'), s.split('.'));
    assert.ok(m('baton.*.activation.1', 'baton.j.activation.1'));
    assert.ok(!m('baton.*.activation.1', 'baton.j.k.activation.1'));
    assert.ok(m('baton.j.>', 'baton.j.activation'));
    assert.ok(m('baton.j.>', 'baton.j.activation.3.0'));
    assert.ok(!m('baton.j.>', 'baton.j'));
    assert.ok(!m('baton.j.>', 'baton.k.activation'));
    assert.ok(m('>', 'a'));
    assert.ok(m('*.*', 'a.b'));
    assert.ok(!m('*.*', 'a.b.c'));
  });

  it('lets a job wildcard see every subject of that job and nothing of another job', () => {
    const bus = new LocalBus();
    const seen: string[] = [];
    bus.subscribe('baton.j1.>', (s) => seen.push(s));
    for (const s of [
      'baton.j1.activation.0',
      'baton.j1.gradient.3',
      'baton.j2.activation.0',
      'baton.j1.control',
      'baton.j1.tp.1.0',
    ])
      bus.publish(s, bytes(0));
    assert.deepEqual(seen, ['baton.j1.activation.0', 'baton.j1.gradient.3', 'baton.j1.control', 'baton.j1.tp.1.0']);
  });

  it('delivers to exact and wildcard subscribers in subscription order', () => {
    const bus = new LocalBus();
    const order: string[] = [];
    bus.subscribe('baton.j.>', () => order.push('wild-1'));
    bus.subscribe('baton.j.data.0', () => order.push('exact-2'));
    bus.subscribe('baton.*.data.0', () => order.push('star-3'));
    bus.subscribe('baton.j.data.0', () => order.push('exact-4'));
    bus.publish('baton.j.data.0', bytes(0));
    bus.publish('baton.j.data.0', bytes(0));
    assert.deepEqual(order, ['wild-1', 'exact-2', 'star-3', 'exact-4', 'wild-1', 'exact-2', 'star-3', 'exact-4']);
  });

  it('catches and counts a throwing handler, reports it, and still delivers to the rest', () => {
    const seen: Array<[string, string]> = [];
    const bus = new LocalBus({ onError: (err, s) => seen.push([(err as Error).message, s]) });
    let after = 0;
    bus.subscribe('a.b', () => {
      throw new Error('boom');
    });
    bus.subscribe('a.b', () => after++);
    bus.publish('a.b', bytes(1));
    bus.publish('a.b', bytes(2));
    assert.equal(bus.errors, 2);
    assert.equal(after, 2);
    assert.deepEqual(seen, [
      ['boom', 'a.b'],
      ['boom', 'a.b'],
    ]);
  });

  it('survives an error hook that throws itself', () => {
    const bus = new LocalBus({
      onError: () => {
        throw new Error('hook');
      },
    });
    bus.subscribe('x', () => {
      throw new Error('handler');
    });
    assert.doesNotThrow(() => bus.publish('x', bytes(1)));
    assert.equal(bus.errors, 1);
  });

  it('stops delivering after unsubscribe, even to a later handler of the same message', () => {
    const bus = new LocalBus();
    let second = 0;
    const subs: Array<{ unsubscribe(): void }> = [];
    subs.push(bus.subscribe('x.y', () => subs[1].unsubscribe()));
    subs.push(bus.subscribe('x.*', () => second++));
    bus.publish('x.y', bytes(1));
    bus.publish('x.y', bytes(1));
    assert.equal(second, 0);
    assert.equal(bus.subscriptionCount, 1);
    subs[0].unsubscribe();
    subs[0].unsubscribe();
    assert.equal(bus.subscriptionCount, 0);
  });

  it('picks up a subscription made after a subject was already published to', () => {
    const bus = new LocalBus();
    let n = 0;
    bus.publish('baton.j.report', bytes(1));
    bus.subscribe('baton.j.*', () => n++);
    bus.publish('baton.j.report', bytes(1));
    assert.equal(n, 1);
  });

  it('delivers messages published from inside a handler', () => {
    const bus = new LocalBus();
    const seen: string[] = [];
    bus.subscribe('ping', () => bus.publish('pong', bytes(1)));
    bus.subscribe('pong', (s) => seen.push(s));
    bus.publish('ping', bytes(0));
    assert.deepEqual(seen, ['pong']);
  });

  it('counts messages and bytes published and delivered', () => {
    const bus = new LocalBus();
    bus.subscribe('a', () => undefined);
    bus.subscribe('>', () => undefined);
    bus.publish('a', new Uint8Array(10));
    bus.publish('b', new Uint8Array(5));
    assert.deepEqual([bus.published, bus.delivered, bus.bytesPublished], [2, 3, 15]);
  });

  it('rejects invalid subjects with a typed error quoting them', () => {
    const bus = new LocalBus();
    assert.throws(() => bus.publish('baton.*.x', bytes(0)), InvalidSubjectError);
    assert.throws(() => bus.publish('a..b', bytes(0)), /"a\.\.b"/);
    assert.throws(() => bus.subscribe('a.>.b', () => undefined), /'>' must be the last token/);
    assert.throws(() => bus.subscribe('', () => undefined), InvalidSubjectError);
    assert.doesNotThrow(() => bus.publish(`a.${'x'.repeat(MAX_SUBJECT_BYTES - 2)}`, bytes(0)));
    assert.throws(() => bus.publish(`a.${'x'.repeat(MAX_SUBJECT_BYTES - 1)}`, bytes(0)), /longer than 1024 bytes/);
    assert.throws(
      () => bus.subscribe(`a.${'é'.repeat(MAX_SUBJECT_BYTES / 2)}`, () => undefined),
      /longer than 1024 bytes/,
    );
  });

  it('drops publishes after close and refuses new subscriptions', async () => {
    const bus = new LocalBus();
    let n = 0;
    bus.subscribe('a', () => n++);
    await bus.close();
    bus.publish('a', bytes(1));
    assert.equal(n, 0);
    assert.equal(bus.dropped, 1);
    assert.throws(() => bus.subscribe('a', () => undefined), BusClosedError);
  });

  it('delivers a million small messages in well under two seconds', () => {
    const bus = new LocalBus();
    let n = 0;
    bus.subscribe('baton.j.activation.1', () => n++);
    bus.subscribe('baton.j.>', () => n++);
    const msg = bytes(1);
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < 1_000_000; i++) bus.publish(i & 1 ? 'baton.j.activation.1' : 'baton.j.gradient.0', msg);
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    assert.equal(n, 1_500_000);
    assert.ok(ms < 2000, `took ${ms.toFixed(0)} ms`);
  });
});
