import { strict as assert } from 'assert';
import { execFileSync } from 'child_process';
import { decodeEnvelope, encodeEnvelope } from '../transport/codec';
import type { Envelope } from '../transport/envelope';
import { NatsBus, NatsBusError } from '../transport/nats-bus';
import { startNatsServer } from '../transport/nats-server';
import { freePort } from '../transport/nats-server-ports';
import { InvalidSubjectError } from '../transport/local-bus';
import { until } from './nats-server-fixture';
import { natsBusSuite } from './nats-bus-fixture';
import { jobWildcard, subject } from '../transport/subjects';

function envelope(seq: number, values: number[]): Envelope {
  return {
    v: 1,
    job: 'nt',
    kind: 'activation',
    iteration: 0,
    mb: seq,
    chunk: 0,
    dir: 'forward',
    src: 0,
    dst: 1,
    seq,
    sentAt: Date.now(),
    bytes: 0,
    tensors: [{ dtype: 'float32', shape: [values.length], data: Float32Array.from(values) }],
  };
}

describe('NatsBus over a real nats-server', function () {
  this.timeout(20_000);
  const { server, bus } = natsBusSuite();

  it('reports the raised max_payload of a generated server', async () => {
    assert.equal((await bus()).maxPayload, 64 * 1024 * 1024);
  });

  it('carries encoded envelopes from one connection to another, decoded intact', async () => {
    const [pub, sub] = [await bus(), await bus()];
    const got: Envelope[] = [];
    sub.subscribe(subject('nt', 'activation', 1), (_s, d) => got.push(decodeEnvelope(d)));
    await sub.flush();
    for (let i = 0; i < 5; i++)
      pub.publish(subject('nt', 'activation', 1), encodeEnvelope(envelope(i, [i, i + 0.5, -i])));
    await pub.flush();
    await until(() => got.length === 5, '5 envelopes');
    assert.deepEqual(
      got.map((e) => [e.seq, Array.from(e.tensors[0].data)]),
      [0, 1, 2, 3, 4].map((i) => [i, [i, i + 0.5, -i]]),
    );
  });

  it('lets a baton.<job>.> subscription see every subject of the job and none of another', async () => {
    const [pub, tap] = [await bus(), await bus()];
    const seen: string[] = [];
    tap.subscribe(jobWildcard('wj'), (s) => seen.push(s));
    await tap.flush();
    const subjects = [
      subject('wj', 'activation', 0),
      subject('wj', 'gradient', 3),
      subject('wj', 'control'),
      subject('wj', 'tp', 1, 2),
    ];
    for (const s of [...subjects, subject('other', 'activation', 0)]) pub.publish(s, new Uint8Array([1]));
    pub.publish(subject('wj', 'report'), new Uint8Array([2]));
    await pub.flush();
    await until(() => seen.includes('baton.wj.report'), 'the last message');
    assert.deepEqual(seen, [...subjects, 'baton.wj.report']);
  });

  it('keeps the connection alive when a handler throws, and counts the error', async () => {
    const errors: string[] = [];
    const b = await bus({ onError: (e) => errors.push((e as Error).message) });
    const got: number[] = [];
    b.subscribe('baton.throw.x', (_s, d) => {
      if (d[0] === 0) throw new Error('handler failed');
      got.push(d[0]);
    });
    await b.flush();
    for (let i = 0; i < 4; i++) b.publish('baton.throw.x', new Uint8Array([i]));
    await b.flush();
    await until(() => got.length === 3, 'the messages after the throwing one');
    assert.deepEqual(got, [1, 2, 3]);
    assert.equal(b.errors, 1);
    assert.deepEqual(errors, ['handler failed']);
    assert.equal(b.connection.isClosed(), false);
  });

  it('flush() makes the server round trip after a subscribe or unsubscribe, not only after publishes, and skips it when nothing was sent', async () => {
    const b = await bus();
    let roundTrips = 0;
    const flush = b.connection.flush.bind(b.connection);
    b.connection.flush = () => {
      roundTrips++;
      return flush();
    };
    const sub = b.subscribe('baton.flush.x', () => {});
    await b.flush();
    assert.equal(roundTrips, 1, 'a subscription must be registered at the server when flush() resolves');
    await b.flush();
    assert.equal(roundTrips, 1, 'nothing sent since: no round trip');
    b.publish('baton.flush.x', new Uint8Array([1]));
    await b.flush();
    assert.equal(roundTrips, 2);
    sub.unsubscribe();
    await b.flush();
    assert.equal(roundTrips, 3);
  });

  it('counts messages and bytes in and out', async () => {
    const b = await bus();
    let n = 0;
    b.subscribe('baton.count.x', () => n++);
    await b.flush();
    b.publish('baton.count.x', new Uint8Array(100));
    b.publish('baton.count.x', new Uint8Array(28));
    await b.flush();
    await until(() => n === 2, 'two messages');
    assert.deepEqual([b.msgsOut, b.bytesOut, b.msgsIn, b.bytesIn], [2, 128, 2, 128]);
  });

  it('written(): once it resolves, the server gets the bytes even while this thread is blocked', async () => {
    const mon = await startNatsServer({ monitor: true });
    const b = await NatsBus.connect(mon.url);
    try {
      const inBytes = () =>
        JSON.parse(
          execFileSync(
            process.execPath,
            [
              '-e',
              `fetch(${JSON.stringify(`${mon.monitorUrl}/varz`)}).then((r) => r.json()).then((v) => console.log(JSON.stringify(v.in_bytes)))`,
            ],
            { encoding: 'utf8' },
          ),
        ) as number;
      const before = inBytes();
      const size = 8 * 1024 * 1024;
      b.publish('baton.nt.activation.9', new Uint8Array(size));
      await b.written();
      // From here the thread never returns to the event loop (as during a compute task):
      // only the kernel and the server can move the bytes.
      const deadline = Date.now() + 10_000;
      let got = inBytes() - before;
      while (got < size && Date.now() < deadline) got = inBytes() - before;
      assert.ok(got >= size, `the server received ${got} of ${size} bytes while the publisher was blocked`);
      await b.written(); // nothing pending: resolves at once
    } finally {
      await b.close();
      await mon.stop();
    }
  });

  it('refuses a subject longer than MAX_SUBJECT_BYTES before the server sees it: a protocol line over 4 KB cost the connection, and what followed it', async () => {
    const [pub, sub] = [await bus(), await bus()];
    let got = 0;
    sub.subscribe('baton.long.ok', () => {
      got++;
    });
    await sub.flush();
    const long = `baton._nodes.${'n'.repeat(5000)}`;
    assert.throws(
      () => pub.publish(long, new Uint8Array(1)),
      (e: unknown) =>
        e instanceof InvalidSubjectError && /longer than 1024 bytes/.test(e.message) && e.message.length < 300,
    );
    assert.throws(() => pub.subscribe(long, () => undefined), InvalidSubjectError);
    pub.publish('baton.long.ok', new Uint8Array(1));
    await pub.flush();
    await until(() => got === 1, 'the message after the refused one');
    assert.equal(pub.disconnects, 0);
  });

  it('counts a publish on a closed connection instead of throwing', async () => {
    const errors: unknown[] = [];
    const b = await NatsBus.connect(server().url, { onError: (e) => errors.push(e) });
    await b.close();
    assert.doesNotThrow(() => b.publish('baton.closed.x', new Uint8Array(3)));
    assert.equal(b.publishErrors, 1);
    assert.equal(errors.length, 1);
    assert.match((errors[0] as Error).message, /"baton\.closed\.x".*3 bytes/);
  });

  it('close() delivers what was published before it, even messages still queued in the socket', async () => {
    const sub = await bus();
    let got = 0;
    sub.subscribe('baton.closing.x', () => {
      got++;
    });
    await sub.flush();
    const pub = await NatsBus.connect(server().url);
    for (let i = 0; i < 20; i++) pub.publish('baton.closing.x', new Uint8Array(4 * 1024 * 1024));
    await pub.close();
    await until(() => got === 20, `20 messages published before close (got ${got})`, 10_000);
  });

  it('close() does not wait long for a server that stopped answering', async () => {
    const own = await startNatsServer();
    const b = await NatsBus.connect(own.url);
    try {
      process.kill(own.pid, 'SIGSTOP');
      b.publish('baton.closing.y', new Uint8Array(16 * 1024 * 1024));
      const t0 = Date.now();
      await b.close();
      assert.ok(Date.now() - t0 < 8000, `close took ${Date.now() - t0} ms`);
    } finally {
      process.kill(own.pid, 'SIGCONT');
      await own.stop();
    }
  });

  it('close() returns at once when the connection is down', async () => {
    const own = await startNatsServer();
    const b = await NatsBus.connect(own.url);
    await own.stop();
    await b.disconnected();
    await new Promise((r) => setTimeout(r, 50));
    b.publish('baton.closing.z', new Uint8Array(10));
    const t0 = Date.now();
    await b.close();
    assert.ok(Date.now() - t0 < 1000, `close took ${Date.now() - t0} ms`);
  });

  it('tells each drop to onDisconnect, and up() waits for the server to come back on its port (rejecting while it is gone)', async () => {
    let own = await startNatsServer();
    const b = await NatsBus.connect(own.url);
    const drops: string[] = [];
    b.onDisconnect = (why) => drops.push(why.message);
    let back = 0;
    b.onReconnect = () => back++;
    try {
      await b.up(1000);
      await own.stop();
      await until(() => drops.length === 1, 'the drop');
      assert.match(drops[0], /^lost the connection to NATS at nats:\/\/127\.0\.0\.1:\d+$/);
      await assert.rejects(b.up(300), /NATS at nats:\/\/127\.0\.0\.1:\d+ was still unreachable after 300 ms/);
      const waiting = b.up(10_000);
      own = await startNatsServer({ port: own.port });
      const t0 = Date.now();
      await waiting;
      assert.equal(back, 1);
      // Dialled again every 250 ms (and a jitter), not nats.js's 2 s.
      assert.ok(Date.now() - t0 < 1500, `back after ${Date.now() - t0} ms`);
      let got = 0;
      b.subscribe('baton.back.x', () => got++);
      await b.flush();
      b.publish('baton.back.x', new Uint8Array(4));
      await until(() => got === 1, 'a message after the reconnect');
    } finally {
      await b.close();
      await own.stop();
    }
  });

  it("keeps a subscriber whose thread a long compute task holds (over the server's default 10 s write deadline), and delivers to it afterwards", async function () {
    this.timeout(60_000);
    const [pub, sub] = [await bus(), await bus()];
    let got = 0;
    sub.subscribe('baton.busy.x', (_s, d) => {
      got += d.byteLength;
    });
    await sub.flush();
    pub.publish('baton.busy.x', new Uint8Array(8 * 1024 * 1024));
    await pub.flush();
    // The server now writes to a connection that does not read, as a stage process's in a task.
    const until12s = Date.now() + 12_000;
    while (Date.now() < until12s) {
      /* busy */
    }
    await until(() => got > 0 || sub.disconnects > 0, 'the message or a disconnect');
    assert.equal(sub.disconnects, 0, 'cut off as a slow consumer');
    assert.equal(got, 8 * 1024 * 1024);
  });

  it('closed() resolves when the server goes away for good, so a watcher can report it', async () => {
    const own = await startNatsServer();
    const bus = await NatsBus.connect(own.url, { reconnect: false });
    let settled = false;
    const closed = bus.closed().then((err) => {
      settled = true;
      return err;
    });
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(settled, false, 'open while the server runs');
    await own.stop();
    await closed;
    assert.equal(settled, true);
  });

  it('fails to connect to a port with no server with a typed error naming the url', async () => {
    const url = `nats://127.0.0.1:${await freePort()}`;
    await assert.rejects(
      NatsBus.connect(url, { timeoutMs: 1000 }),
      (e: unknown) => e instanceof NatsBusError && e.message.includes(url),
    );
  });

  it('sends a message over the server max_payload in chunks, delivered whole', async () => {
    const small = await startNatsServer({ maxPayload: 256 * 1024 });
    const b = await NatsBus.connect(small.url);
    try {
      assert.equal(b.maxPayload, 256 * 1024);
      const got: number[] = [];
      b.subscribe('baton.big.x', (_s, d) => got.push(d.byteLength));
      await b.flush();
      b.publish('baton.big.x', new Uint8Array(256 * 1024 + 1));
      b.publish('baton.big.x', new Uint8Array(256 * 1024));
      await b.flush();
      await until(() => got.length === 2, 'both messages');
      assert.deepEqual(got, [256 * 1024 + 1, 256 * 1024]);
      assert.equal(b.chunkedOut, 1);
      assert.equal(b.connection.isClosed(), false);
    } finally {
      await b.close();
      await small.stop();
    }
  });

  it('delivers across a 3-server cluster joined by routes: published on A, received on C', async () => {
    const a = await startNatsServer({ cluster: true, monitor: true, name: 'A' });
    const b = await startNatsServer({ routes: [a.clusterUrl!], monitor: true, name: 'B' });
    const c = await startNatsServer({ routes: [a.clusterUrl!], monitor: true, name: 'C' });
    const [onA, onC] = [await NatsBus.connect(a.url), await NatsBus.connect(c.url)];
    try {
      await Promise.all([a.waitForRoutes(2), b.waitForRoutes(2), c.waitForRoutes(2)]);
      const got: Envelope[] = [];
      onC.subscribe('baton.cl.>', (_s, d) => got.push(decodeEnvelope(d)));
      await onC.flush();
      // Interest travels from C to A over the route asynchronously: publish until it lands.
      for (let i = 0; got.length === 0; i++) {
        assert.ok(i < 200, 'nothing published on A reached C within 10 s');
        onA.publish(subject('cl', 'gradient', 2), encodeEnvelope(envelope(i, [7, 8])));
        await onA.flush();
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.deepEqual(Array.from(got[0].tensors[0].data), [7, 8]);
      assert.equal(got[0].job, 'nt');
    } finally {
      await Promise.all([onA.close(), onC.close()]);
      await Promise.all([a.stop(), b.stop(), c.stop()]);
    }
  });
});
