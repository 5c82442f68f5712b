import { strict as assert } from 'assert';
import { benchBusThroughput, formatBusThroughput, repeatOrder } from '../bench/bus-throughput';
import { pump } from '../bench/bus-pump';
import { isViewInto } from '../bench/bus-runs';
import { float32Activation } from '../bench/activation-envelope';
import { decodeEnvelope, encodeEnvelope } from '../transport/codec';

describe('the bus benchmark', function () {
  this.timeout(60000);

  it('fails a run whose messages stop arriving, instead of waiting forever', async () => {
    let got = 0;
    // Every third message is lost, as NATS core may lose them.
    const run = pump(
      10,
      4,
      () => got,
      (i) => {
        if (i % 3 !== 2) setImmediate(() => got++);
      },
      300,
    );
    await assert.rejects(run, /of 10 messages received; none for 300 ms/);
    let all = 0;
    assert.ok(
      (await pump(
        10,
        4,
        () => all,
        () => setImmediate(() => all++),
        300,
      )) >= 0,
    );
  });

  it('counts a decoded tensor as zero-copy only when it lies within the received message', () => {
    const t = new Float32Array([1, 2, 3, 4]);
    const e = float32Activation('j', t);
    const enc = encodeEnvelope(e);
    // Two messages back to back in one receive buffer, as a client's read gives them.
    const chunk = new Uint8Array(2 * enc.byteLength + 8);
    chunk.set(enc, 0);
    chunk.set(enc, enc.byteLength + 8 - (enc.byteLength % 8));
    const first = chunk.subarray(0, enc.byteLength);
    const second = chunk.subarray(
      enc.byteLength + 8 - (enc.byteLength % 8),
      enc.byteLength + 8 - (enc.byteLength % 8) + enc.byteLength,
    );
    const decoded = decodeEnvelope(first).tensors[0].data;
    assert.ok(isViewInto(decoded, first));
    // Same buffer, but the bytes of another message: not a view into this one.
    assert.equal(decoded.buffer, second.buffer);
    assert.ok(!isViewInto(decoded, second));
    // A copy is not a view.
    assert.ok(!isViewInto(new Float32Array(decoded), first));
  });

  it('alternates which side goes first, raw and sealed Baton each in half the repeats, every side in each', () => {
    assert.deepEqual(
      [0, 1, 2, 3].map((r) => repeatOrder(r)[0]),
      ['raw', 'sealed', 'raw', 'sealed'],
    );
    for (const r of [0, 1]) assert.deepEqual([...repeatOrder(r)].sort(), ['baton', 'raw', 'sealed']);
  });

  it('measures every side each repeat, receiver in the same process and in a child, and finds zero-copy decoding on loopback NATS', async () => {
    const r = await benchBusThroughput({ messageBytes: 64 * 1024, messages: 6, repeats: 2 });
    assert.deepEqual(
      r.layouts.map((l) => l.processes),
      [1, 2],
    );
    for (const l of r.layouts) {
      assert.equal(l.rawRunsMBps.length, 2);
      assert.equal(l.batonRunsMBps.length, 2);
      assert.equal(l.sealedRunsMBps.length, 2);
      assert.ok(l.rawMBps > 0 && l.batonMBps > 0 && l.sealedMBps > 0);
    }
    // Both layouts' decodes are counted (the child's over IPC): 2 layouts x 2 Baton sides x 2 repeats x 6 messages.
    assert.equal(r.decodedMessages, 48);
    assert.equal(r.zeroCopyFraction, 1);
    assert.equal(r.zeroCopyDecode, true);
    assert.equal(r.zeroCopyFraction, 1);
    assert.match(formatBusThroughput(r), /^bus throughput, 6 × 0\.0625 MiB float32 messages, median of 2:/);
    assert.match(formatBusThroughput({ ...r, messageBytes: 256 * 1024 }), / × 0\.25 MiB /);
  });

  it('under a 1 MiB max_payload (a stock server) sends 4 MiB tensors in chunks, raw nats.js in pieces, both measured', async () => {
    const r = await benchBusThroughput({ messageBytes: 4 << 20, messages: 4, repeats: 1, maxPayload: 1 << 20 });
    assert.equal(r.maxPayload, 1 << 20);
    assert.equal(r.piecesPerMessage, 4);
    assert.equal(r.chunksPerMessage, 5, 'the envelope is a little over 4 MiB: four full chunks and a short one');
    for (const l of r.layouts) assert.ok(l.rawMBps > 0 && l.batonMBps > 0 && l.sealedMBps > 0);
    assert.equal(r.zeroCopyDecode, true, 'a reassembled message decodes without a copy');
    assert.match(
      formatBusThroughput(r),
      /max_payload 1 MiB: Baton sends each message in 5 chunks, raw nats.js in 4 pieces/,
    );
  });
});
