import { strict as assert } from 'assert';
import { CHUNK_HEADER_BYTES, ChunkRejection, ChunkSender, Reassembler, isChunkFrame } from '../transport/chunking';
import { NatsBus, PayloadTooLargeError } from '../transport/nats-bus';
import { NatsServerHandle, startNatsServer } from '../transport/nats-server';
import { DEFAULT_MAX_MESSAGE_BYTES } from '../transport/codec';
import { until } from './nats-server-fixture';

function pattern(n: number, seed = 1): Uint8Array {
  const out = new Uint8Array(n);
  let x = seed;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    out[i] = x >>> 24;
  }
  return out;
}

function reassembler(limits: Partial<ConstructorParameters<typeof Reassembler>[0]> = {}, clock = { t: 0 }) {
  const seen: ChunkRejection[] = [];
  const r = new Reassembler(
    { maxMessageBytes: 1 << 20, ...limits },
    (e) => seen.push(e),
    () => clock.t,
  );
  return { r, seen, clock };
}

describe('chunking: frames and reassembly', () => {
  it('splits a message into frames none over max_payload and puts it back together byte for byte', () => {
    const data = pattern(100_003);
    const frames = new ChunkSender().frames(data, 4096);
    assert.ok(frames.every((f) => f.byteLength <= 4096 && isChunkFrame(f)));
    assert.equal(frames.length, Math.ceil(100_003 / (4096 - CHUNK_HEADER_BYTES)));
    const { r, seen } = reassembler();
    const outs = frames.map((f) => r.accept('s', f));
    assert.ok(outs.slice(0, -1).every((o) => o === null));
    assert.deepEqual(outs.at(-1), data);
    assert.equal(
      outs.at(-1)!.byteOffset % 8,
      0,
      'the whole message starts aligned, so the codec decodes without a copy',
    );
    assert.deepEqual(seen, []);
    assert.equal(r.bytesPending, 0);
  });

  it('reassembles chunks that arrive out of order and ignores duplicates', () => {
    const data = pattern(50_000, 7);
    const frames = new ChunkSender().frames(data, 1000);
    const order = frames.map((_, i) => i).reverse();
    const { r, seen } = reassembler();
    let whole: Uint8Array | null = null;
    for (const i of order) {
      whole = r.accept('s', frames[i]) ?? whole;
      if (i % 3 === 0 && i > 0) assert.equal(r.accept('s', frames[i]), null);
    }
    assert.deepEqual(whole, data);
    assert.deepEqual(seen, []);
    assert.equal(r.completed, 1);
  });

  it('keeps messages of several senders and subjects apart', () => {
    const [a, b] = [new ChunkSender(), new ChunkSender()];
    const [da, db] = [pattern(9000, 2), pattern(7000, 3)];
    const [fa, fb] = [a.frames(da, 1000), b.frames(db, 1000)];
    const { r } = reassembler();
    const got: Uint8Array[] = [];
    for (let i = 0; i < Math.max(fa.length, fb.length); i++) {
      for (const [f, s] of [
        [fa[i], 'x'],
        [fb[i], 'y'],
      ] as const) {
        const w = f && r.accept(s, f);
        if (w) got.push(w);
      }
    }
    assert.deepEqual(got, [db, da]);
  });

  it('refuses a corrupt chunk by its CRC, counted, and the message never completes', () => {
    const frames = new ChunkSender().frames(pattern(5000), 1000);
    frames[2][CHUNK_HEADER_BYTES + 10] ^= 1;
    const { r, seen } = reassembler();
    assert.ok(frames.every((f) => r.accept('s', f) === null));
    assert.equal(r.rejected.checksum, 1);
    assert.match(seen[0].message, /chunk on "s" refused \(checksum\)/);
  });

  it('drops a message whose chunk is missing after the timeout, counted once, and frees its memory', () => {
    const clock = { t: 0 };
    const { r, seen } = reassembler({ timeoutMs: 500 }, clock);
    const frames = new ChunkSender().frames(pattern(5000), 1000);
    frames.slice(1).forEach((f) => assert.equal(r.accept('s', f), null));
    assert.equal(r.bytesPending, 5000);
    clock.t = 501;
    r.expire();
    assert.equal(r.rejected.timeout, 1);
    assert.equal(r.bytesPending, 0);
    assert.match(seen[0].message, /\(timeout\).*5 of 6 chunks within 500 ms/);
    // The late first chunk starts a new partial message, which itself times out: no crash, no delivery.
    assert.equal(r.accept('s', frames[0]), null);
  });

  it('bounds memory per sender: a sender that starts many messages loses its oldest, counted', () => {
    const { r } = reassembler({ maxMessageBytes: 10_000, maxBytesPerSender: 20_000 });
    const sender = new ChunkSender();
    for (let i = 0; i < 5; i++) r.accept('s', sender.frames(pattern(10_000, i), 1000)[0]);
    assert.equal(r.rejected.evicted, 3);
    assert.equal(r.bytesPending, 20_000);
    assert.equal(r.partialMessages, 2);
  });

  it('bounds memory per subscription over all senders', () => {
    const { r } = reassembler({ maxMessageBytes: 10_000, maxBytesPerSubscription: 30_000 });
    for (let i = 0; i < 6; i++) r.accept('s', new ChunkSender().frames(pattern(10_000, i), 1000)[0]);
    assert.equal(r.rejected.evicted, 3);
    assert.equal(r.bytesPending, 30_000);
  });

  it('refuses a chunk that declares a message over the limit before allocating it', () => {
    const { r } = reassembler({ maxMessageBytes: 4000 });
    assert.equal(r.accept('s', new ChunkSender().frames(pattern(5000), 1000)[0]), null);
    assert.equal(r.rejected.oversize, 1);
    assert.equal(r.bytesPending, 0);
  });

  it('refuses chunks of a message that disagree with its first chunk or have the wrong length', () => {
    const sender = new ChunkSender();
    const frames = sender.frames(pattern(5000), 1000);
    const { r } = reassembler();
    r.accept('s', frames[0]);
    assert.equal(r.accept('other', frames[1]), null);
    assert.equal(r.rejected.inconsistent, 1);
    const short = frames[2].slice(0, frames[2].byteLength - 1);
    assert.equal(r.accept('s', short), null);
    assert.equal(r.rejected.checksum + r.rejected.malformed, 1);
  });

  it('never throws on random bytes behind a chunk magic, and delivers nothing from them', () => {
    const { r } = reassembler();
    for (let i = 0; i < 2000; i++) {
      const f = pattern(4 + (i % 90), i + 11);
      f.set([0xff, 0x42, 0x43, i % 7 === 0 ? 0x01 : i % 256], 0);
      assert.equal(r.accept('s', f), null);
    }
    const total = Object.values(r.rejected).reduce((a, b) => a + b, 0);
    assert.equal(total, 2000);
  });
});

describe('chunking over a stock nats-server (max_payload 1 MB)', function () {
  this.timeout(30_000);
  let server: NatsServerHandle;
  const buses: NatsBus[] = [];
  const bus = async () => {
    const b = await NatsBus.connect(server.url);
    buses.push(b);
    return b;
  };
  before(async () => {
    server = await startNatsServer({ stock: true });
  });
  after(async () => {
    await Promise.all(buses.map((b) => b.close()));
    await server?.stop();
  });

  it('carries 4 MiB messages intact through a server with the default max_payload', async () => {
    const [pub, sub] = [await bus(), await bus()];
    assert.equal(pub.maxPayload, 1024 * 1024);
    assert.equal(pub.maxMessageBytes, DEFAULT_MAX_MESSAGE_BYTES);
    const got: Uint8Array[] = [];
    sub.subscribe('baton.big.>', (_s, d) => got.push(d.slice()));
    await sub.flush();
    const sent = [pattern(4 << 20, 1), pattern(100, 2), pattern((1 << 20) + 1, 3)];
    for (const d of sent) pub.publish('baton.big.x', d);
    await pub.flush();
    await until(() => got.length === 3, 'three messages', 10_000);
    got.forEach((g, i) => assert.ok(Buffer.from(g).equals(Buffer.from(sent[i])), `message ${i}`));
    assert.equal(pub.chunkedOut, 2);
    assert.equal(sub.chunkRejections, 0);
  });

  it('counts a lone forged chunk from a stranger and keeps delivering', async () => {
    const [pub, sub] = [await bus(), await bus()];
    const got: number[] = [];
    sub.subscribe('baton.forge.x', (_s, d) => got.push(d.byteLength));
    await sub.flush();
    const forged = new ChunkSender().frames(pattern(3000), 1000);
    forged[0][CHUNK_HEADER_BYTES] ^= 0xff;
    pub.connection.publish('baton.forge.x', forged[0]);
    pub.publish('baton.forge.x', pattern(2 << 20));
    await pub.flush();
    await until(() => got.length === 1 && sub.chunkRejections === 1, 'the real message and the rejection');
    assert.deepEqual(got, [2 << 20]);
    assert.equal(sub.connection.isClosed(), false);
  });

  it("refuses a message over the codec's limit with PayloadTooLargeError", async () => {
    const pub = await bus();
    assert.throws(
      () => pub.publish('baton.big.y', new Uint8Array(DEFAULT_MAX_MESSAGE_BYTES + 1)),
      (e: unknown) => e instanceof PayloadTooLargeError && e.limit === DEFAULT_MAX_MESSAGE_BYTES,
    );
  });
});
