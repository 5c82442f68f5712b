import { strict as assert } from 'assert';
import { spawnSync } from 'child_process';
import {
  CodecError,
  DTYPES,
  MAX_NESTING,
  decodeEnvelope,
  decodeValue,
  encodeEnvelope,
  encodeValue,
} from '../transport/codec';
import { quoteValue } from '../base/quote';
import type { CodecErrorReason } from '../transport/codec';
import type { AnyTypedArray, DType, Envelope, TensorPayload } from '../transport/envelope';

const CTORS: Record<DType, new (n: number) => AnyTypedArray> = {
  float32: Float32Array,
  float64: Float64Array,
  int32: Int32Array,
  int16: Int16Array,
  int8: Int8Array,
  uint32: Uint32Array,
  uint16: Uint16Array,
  uint8: Uint8Array,
};

function tensor(dtype: DType, shape: number[], seed = 1): TensorPayload {
  const n = shape.reduce((a, b) => a * b, 1);
  const data = new CTORS[dtype](n);
  for (let i = 0; i < n; i++)
    data[i] = dtype.startsWith('float')
      ? (i + seed) * 0.5 - 3.25
      : ((i * 7 + seed) % 100) - (dtype.startsWith('u') ? 0 : 50);
  return { dtype, shape, data };
}

function envelope(tensors: TensorPayload[], extra: Partial<Envelope> = {}): Envelope {
  return {
    v: 1,
    job: 'job-1',
    kind: 'activation',
    iteration: 7,
    mb: 3,
    chunk: 0,
    dir: 'forward',
    src: 0,
    dst: 1,
    seq: 42,
    sentAt: 1_700_000_000_123.5,
    bytes: 0,
    tensors,
    ...extra,
  };
}

/** The header fields of a valid envelope as a plain object, for hand-made bad messages. */
function rawHeader(): Record<string, unknown> {
  const { tensors: _t, ...h } = envelope([]);
  return { ...h, tensors: [] };
}

/** A valid header (and no tensors) plus one more entry, `key` mapped to the CBOR item `itemHex`. */
function withEntry(key: string, itemHex: string): Uint8Array {
  const head = encodeValue(rawHeader()); // a map with a 16-bit count: b9 00 nn
  assert.equal(head[0], 0xb9);
  const keyItem = Buffer.concat([Buffer.of(0x60 + key.length), Buffer.from(key)]);
  return Uint8Array.from(
    Buffer.concat([Buffer.of(0xb9, head[1], head[2] + 1), head.subarray(3), keyItem, Buffer.from(itemHex, 'hex')]),
  );
}

/** Index of the first occurrence of `seq` in `bytes`. */
function indexOf(bytes: Uint8Array, seq: number[]): number {
  const i = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).indexOf(Buffer.from(seq));
  assert.ok(i >= 0, `no ${seq} in the message`);
  return i;
}

function rejects(bytes: Uint8Array, reason: CodecErrorReason, quote?: RegExp, opts = {}): void {
  assert.throws(
    () => decodeEnvelope(bytes, opts),
    (err: unknown) => {
      assert.ok(err instanceof CodecError, `expected a CodecError, got ${String(err)}`);
      assert.equal(err.reason, reason, err.message);
      if (quote) assert.match(err.message, quote);
      return true;
    },
  );
}

describe('codec', () => {
  describe('round trip', () => {
    for (const dtype of DTYPES) {
      it(`carries a ${dtype} tensor unchanged`, () => {
        const t = tensor(dtype, [3, 5]);
        const back = decodeEnvelope(encodeEnvelope(envelope([t])));
        assert.equal(back.tensors.length, 1);
        assert.equal(back.tensors[0].dtype, dtype);
        assert.deepEqual(back.tensors[0].shape, [3, 5]);
        assert.equal(back.tensors[0].data.constructor, CTORS[dtype]);
        assert.deepEqual(Array.from(back.tensors[0].data), Array.from(t.data));
      });
    }

    it('carries every header field and the control body unchanged', () => {
      const e = envelope([], {
        kind: 'control',
        dir: 'control',
        src: -1,
        dst: 2,
        mb: -1,
        bytes: 1 << 20,
        body: { verb: 'stop', at: [1, 2.5], nested: { ok: true } },
      });
      assert.deepEqual(decodeEnvelope(encodeEnvelope(e)), e);
      const timed = envelope([], { commMs: 1.25 });
      assert.deepEqual(decodeEnvelope(encodeEnvelope(timed)), timed);
      const launched = envelope([tensor('float32', [2])], { launch: '0123456789ab' });
      assert.equal(decodeEnvelope(encodeEnvelope(launched)).launch, '0123456789ab');
    });

    it('carries empty tensors and messages with no tensors', () => {
      const e = envelope([tensor('float32', [0]), tensor('float64', [4, 0, 2]), tensor('uint8', [0])]);
      const back = decodeEnvelope(encodeEnvelope(e));
      assert.deepEqual(
        back.tensors.map((t) => [t.dtype, t.shape, t.data.length]),
        [
          ['float32', [0], 0],
          ['float64', [4, 0, 2], 0],
          ['uint8', [0], 0],
        ],
      );
      assert.deepEqual(decodeEnvelope(encodeEnvelope(envelope([]))).tensors, []);
    });

    it('carries many tensors of mixed dtypes in order', () => {
      const ts = [
        tensor('int8', [3]),
        tensor('float64', [2, 2]),
        tensor('uint16', [5]),
        tensor('float32', [7, 3]),
        tensor('int32', [1]),
      ];
      const back = decodeEnvelope(encodeEnvelope(envelope(ts)));
      back.tensors.forEach((t, i) => {
        assert.equal(t.dtype, ts[i].dtype);
        assert.deepEqual(t.shape, ts[i].shape);
        assert.deepEqual(Array.from(t.data), Array.from(ts[i].data));
      });
    });

    it('encodes a tensor that is a view into a larger buffer from its own bytes only', () => {
      const big = new Float32Array([9, 1, 2, 3, 9]);
      const back = decodeEnvelope(
        encodeEnvelope(envelope([{ dtype: 'float32', shape: [3], data: big.subarray(1, 4) }])),
      );
      assert.deepEqual(Array.from(back.tensors[0].data), [1, 2, 3]);
    });
  });

  describe('alignment and zero copy', () => {
    it('decodes every tensor as a view into the message buffer at an aligned offset', () => {
      const ts = [
        tensor('int8', [3]),
        tensor('float64', [3]),
        tensor('uint16', [1]),
        tensor('float32', [5]),
        tensor('float64', [2]),
        tensor('int32', [3]),
      ];
      const bytes = encodeEnvelope(envelope(ts));
      const back = decodeEnvelope(bytes);
      for (const t of back.tensors) {
        assert.equal(t.data.buffer, bytes.buffer, `${t.dtype} was copied`);
        assert.ok(
          t.data.byteOffset >= bytes.byteOffset &&
            t.data.byteOffset + t.data.byteLength <= bytes.byteOffset + bytes.byteLength,
        );
        assert.equal(t.data.byteOffset % 8, 0, `${t.dtype} at offset ${t.data.byteOffset}`);
      }
    });

    it('shares memory with the message: writing the decoded tensor changes the bytes', () => {
      const bytes = encodeEnvelope(envelope([tensor('float32', [1024, 1024])]));
      const data = decodeEnvelope(bytes).tensors[0].data as Float32Array;
      assert.equal(data.buffer, bytes.buffer);
      data[0] = 123.5;
      assert.equal(new Float32Array(bytes.buffer, data.byteOffset, 1)[0], 123.5);
    });

    it('still decodes a message sitting at a misaligned offset, by copying', () => {
      const bytes = encodeEnvelope(envelope([tensor('float64', [6])]));
      const host = new Uint8Array(bytes.length + 3);
      host.set(bytes, 3);
      const back = decodeEnvelope(host.subarray(3));
      assert.deepEqual(Array.from(back.tensors[0].data), Array.from(tensor('float64', [6]).data));
      assert.notEqual(back.tensors[0].data.buffer, host.buffer);
    });
  });

  describe('rejection', () => {
    it('rejects bytes that are not CBOR or not a map as malformed', () => {
      rejects(Uint8Array.from([0xfc, 0x01]), 'malformed');
      rejects(encodeValue([1, 2, 3]), 'malformed', /\[1,2,3\]/);
      rejects(Uint8Array.of(...encodeEnvelope(envelope([])), 0x00), 'malformed');
    });

    it('rejects a truncated message and an empty one as truncated', () => {
      const bytes = encodeEnvelope(envelope([tensor('float32', [16])]));
      rejects(bytes.subarray(0, bytes.length - 5), 'truncated');
      rejects(bytes.subarray(0, 10), 'truncated');
      rejects(new Uint8Array(0), 'truncated');
    });

    it('rejects a message over the size limit, naming size and limit', () => {
      const bytes = encodeEnvelope(envelope([tensor('float32', [256])]));
      rejects(bytes, 'oversize', new RegExp(`${bytes.length} bytes.*1000`), { maxBytes: 1000 });
    });

    it('rejects another version, quoting it', () => {
      rejects(encodeValue({ ...rawHeader(), v: 2 }), 'version', /version 2 /);
    });

    it('rejects a missing field, naming it', () => {
      const h = rawHeader();
      delete h.seq;
      rejects(encodeValue(h), 'missing-field', /"seq"/);
      const h2 = rawHeader();
      delete h2.tensors;
      rejects(encodeValue(h2), 'missing-field', /"tensors"/);
      rejects(
        encodeValue({ ...rawHeader(), tensors: [{ dtype: 'float32', shape: [1] }] }),
        'missing-field',
        /tensors\[0\].*"data"/,
      );
    });

    it('rejects fields of the wrong type, quoting the value', () => {
      rejects(encodeValue({ ...rawHeader(), mb: 1.5 }), 'bad-field', /"mb".*1\.5/);
      rejects(encodeValue({ ...rawHeader(), iteration: '3' }), 'bad-field', /"iteration".*"3"/);
      rejects(encodeValue({ ...rawHeader(), sentAt: NaN }), 'bad-field', /"sentAt".*NaN/);
      rejects(encodeValue({ ...rawHeader(), dir: 'sideways' }), 'bad-field', /sideways/);
      rejects(encodeValue({ ...rawHeader(), job: 'a.b' }), 'bad-field', /"a\.b"/);
      rejects(encodeValue({ ...rawHeader(), seq: -1 }), 'bad-field', /"seq".*-1/);
      rejects(encodeValue({ ...rawHeader(), body: [1] }), 'bad-field', /"body"/);
      rejects(encodeValue({ ...rawHeader(), commMs: -1 }), 'bad-field', /"commMs".*-1/);
      rejects(encodeValue({ ...rawHeader(), commMs: NaN }), 'bad-field', /"commMs".*NaN/);
      rejects(encodeValue({ ...rawHeader(), commMs: 4e6 }), 'bad-field', /"commMs"/);
      rejects(encodeValue({ ...rawHeader(), commMs: '2' }), 'bad-field', /"commMs".*"2"/);
      rejects(encodeValue({ ...rawHeader(), tensors: 5 }), 'bad-field', /tensors.*5/);
      rejects(encodeValue({ ...rawHeader(), launch: 'a.b' }), 'bad-field', /"launch".*"a\.b"/);
      rejects(encodeValue({ ...rawHeader(), launch: '' }), 'bad-field', /"launch"/);
      rejects(encodeValue({ ...rawHeader(), launch: 7 }), 'bad-field', /"launch".*7/);
      rejects(encodeValue({ ...rawHeader(), launch: 'x'.repeat(65) }), 'bad-field', /"launch"/);
    });

    it('rejects an unknown dtype and data of the wrong type', () => {
      rejects(
        encodeValue({ ...rawHeader(), tensors: [{ dtype: 'bfloat16', shape: [2], data: new Uint16Array(2) }] }),
        'dtype',
        /"bfloat16"/,
      );
      rejects(
        encodeValue({ ...rawHeader(), tensors: [{ dtype: 'float32', shape: [2], data: new Int32Array(2) }] }),
        'dtype',
        /Int32Array/,
      );
      rejects(
        encodeValue({ ...rawHeader(), tensors: [{ dtype: 'float32', shape: [2], data: [1, 2] }] }),
        'dtype',
        /Float32Array/,
      );
    });

    it('rejects a shape that does not match the byte length or is not made of non-negative integers', () => {
      rejects(
        encodeValue({ ...rawHeader(), tensors: [{ dtype: 'float32', shape: [3], data: new Float32Array(2) }] }),
        'shape',
        /\[3\].*12 bytes.*8/,
      );
      rejects(
        encodeValue({ ...rawHeader(), tensors: [{ dtype: 'int16', shape: [2, -1], data: new Int16Array(2) }] }),
        'shape',
        /-1/,
      );
      rejects(
        encodeValue({ ...rawHeader(), tensors: [{ dtype: 'int16', shape: [1.5], data: new Int16Array(2) }] }),
        'shape',
        /1\.5/,
      );
      rejects(
        encodeValue({ ...rawHeader(), tensors: [{ dtype: 'int16', shape: 'x', data: new Int16Array(2) }] }),
        'shape',
        /"x"/,
      );
    });

    it('rejects tensor data whose byte length is not a whole number of elements, wherever it sits', () => {
      // A float32 [1] tensor whose byte string says 7 bytes: cbor-x alone made a view of 1 element and dropped 3 bytes.
      const good = encodeEnvelope(envelope([tensor('float32', [1])]));
      const at = indexOf(good, [0xd8, 85, 0x44]);
      const lying = Uint8Array.of(...good.subarray(0, at), 0xd8, 85, 0x47, ...good.subarray(at + 3), 1, 2, 3);
      for (let shift = 0; shift < 8; shift++) {
        const host = new Uint8Array(lying.length + shift);
        host.set(lying, shift);
        rejects(host.subarray(shift), 'shape', /7 bytes/);
      }
    });

    it('rejects a typed-array tag on anything but a byte string, and big-endian typed arrays', () => {
      const good = encodeEnvelope(envelope([tensor('float32', [1])]));
      const at = indexOf(good, [0xd8, 85, 0x44]);
      const tagged = (item: number[]) => Uint8Array.of(...good.subarray(0, at), ...item);
      // shape [1] -> [0], so an empty array would fit it
      const shape0 = (b: Uint8Array) => {
        const i = indexOf(b, [0x65, ...Buffer.from('shape'), 0x81, 0x01]);
        b[i + 7] = 0;
        return b;
      };
      rejects(shape0(tagged([0xd8, 85, 0x80])), 'dtype', /byte string/);
      rejects(shape0(tagged([0xd8, 85, 0x61, 0x78])), 'dtype', /byte string/);
      rejects(shape0(tagged([0xd8, 64, 0xa0])), 'dtype', /byte string/);
      rejects(tagged([0xd8, 81, 0x44, 0x3f, 0x80, 0, 0]), 'dtype', /big-endian/);
    });

    it('rejects a body holding what no Baton peer sends: dates, big integers, sets, maps, regular expressions, shared or cyclic references', () => {
      const text = (s: string) => Buffer.concat([Buffer.of(0x60 + s.length), Buffer.from(s)]).toString('hex');
      const bodyWith = (itemHex: string) => withEntry('body', `a1${text('x')}${itemHex}`);
      assert.deepEqual(decodeEnvelope(bodyWith('01')).body, { x: 1 });
      rejects(bodyWith('c11a5f000000'), 'bad-field', /"body".*Date/);
      rejects(bodyWith('1b0000000000000001'), 'bad-field', /"body".*bigint/);
      rejects(bodyWith('c249010000000000000000'), 'bad-field', /"body".*bigint/);
      rejects(bodyWith('d9010281a0'), 'bad-field', /"body".*Set/);
      rejects(bodyWith('d90103a10102'), 'bad-field', /"body".*Map/);
      rejects(bodyWith(`d81b82${text('RegExp')}${text('a+')}`), 'bad-field', /"body".*RegExp/);
      rejects(bodyWith('d9ffff01'), 'bad-field', /"body".*Tag/);
      rejects(withEntry('body', `d81ca1${text('self')}d81d00`), 'bad-field', /"body".*(shared|cyclic)/);
      assert.throws(
        () => decodeValue(Buffer.from(`a1${text('when')}c11a5f000000`, 'hex')),
        (e: unknown) => e instanceof CodecError && /Date/.test(e.message),
      );
    });

    it('rejects a body nested deeper than MAX_NESTING and takes one exactly that deep', () => {
      const nest = (levels: number) => '81'.repeat(levels) + '01';
      const atLimit = decodeEnvelope(withEntry('body', `a1617a${nest(MAX_NESTING - 1)}`)).body as Record<
        string,
        unknown
      >;
      let x: unknown = atLimit.z;
      for (let i = 0; i < MAX_NESTING - 1; i++) x = (x as unknown[])[0];
      assert.equal(x, 1);
      rejects(
        withEntry('body', `a1617a${nest(MAX_NESTING)}`),
        'bad-field',
        new RegExp(`"body".*nested over ${MAX_NESTING} deep`),
      );
      rejects(withEntry('body', `a1617a${nest(1000)}`), 'bad-field', /nested over/);
      assert.throws(
        () => decodeValue(Buffer.from(nest(MAX_NESTING + 1), 'hex')),
        (e: unknown) => e instanceof CodecError && /nested over/.test(e.message),
      );
    });

    it('answers any corruption of a valid message with a CodecError or a valid envelope, never another exception', () => {
      const good = encodeEnvelope(
        envelope([tensor('float32', [2, 3]), tensor('int8', [3])], { body: { a: [1, 'x'] } }),
      );
      let seed = 12345;
      const rnd = (n: number) => {
        seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
        return Math.floor((seed / 2 ** 32) * n);
      };
      const reasons = new Set<string>();
      for (let i = 0; i < 8_000; i++) {
        const m = Uint8Array.from(good);
        for (let f = rnd(3); f >= 0; f--) m[rnd(m.length)] = rnd(256);
        const cut = rnd(4) === 0 ? m.subarray(0, rnd(m.length)) : m;
        try {
          const e = decodeEnvelope(cut);
          for (const t of e.tensors)
            assert.equal(t.data.byteLength, t.shape.reduce((a, b) => a * b, 1) * t.data.BYTES_PER_ELEMENT);
        } catch (err) {
          if (!(err instanceof CodecError))
            throw new Error(`non-codec error ${String(err)} for ${Buffer.from(cut).toString('hex')}`);
          reasons.add(err.reason);
        }
      }
      for (const r of ['malformed', 'truncated', 'missing-field', 'bad-field', 'dtype'])
        assert.ok(reasons.has(r), `no ${r} among ${[...reasons]}`);
    });

    it('refuses to encode a tensor whose shape, dtype or size is wrong', () => {
      const bad = (t: TensorPayload, reason: CodecErrorReason, opts = {}) =>
        assert.throws(
          () => encodeEnvelope(envelope([t]), opts),
          (e: unknown) => e instanceof CodecError && e.reason === reason,
        );
      bad({ dtype: 'float32', shape: [4], data: new Float32Array(3) }, 'shape');
      bad({ dtype: 'float32', shape: [3], data: new Float64Array(3) }, 'dtype');
      bad({ dtype: 'complex64' as DType, shape: [3], data: new Float32Array(3) }, 'dtype');
      bad(tensor('float32', [1000]), 'oversize', { maxBytes: 2000 });
      assert.throws(
        () => encodeEnvelope(envelope([], { v: 3 })),
        (e: unknown) => e instanceof CodecError && e.reason === 'version',
      );
    });
  });

  describe('quoting bad values in errors', () => {
    it("quotes a peer's cyclic or shared value at once (a 60-byte message with tags 28/29 once held decodeEnvelope for good)", () => {
      // In a child process: without a bound, the quote never ends.
      const script = `
        const c = require(${JSON.stringify(require.resolve('../transport/codec'))});
        const q = require(${JSON.stringify(require.resolve('../base/quote'))});
        const text = (s) => Buffer.concat([Buffer.of(0x60 + s.length), Buffer.from(s)]).toString('hex');
        const cyclic = Buffer.from('a2' + text('v') + '01' + text('job') + 'd81c88' + 'd81d00'.repeat(8), 'hex');
        const out = [];
        try { c.decodeEnvelope(cyclic); } catch (e) { out.push(e.reason, e.message); }
        const a = []; for (let i = 0; i < 8; i++) a.push(a);
        const o = {}; for (let i = 0; i < 6; i++) o['k' + i] = o;
        let dag = [1]; for (let i = 0; i < 40; i++) dag = Array(8).fill(dag);
        out.push(q.quoteValue(a), q.quoteValue(o), q.quoteValue(dag));
        console.log(JSON.stringify(out));`;
      const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20_000 });
      assert.equal(r.signal, null, 'the child did not finish');
      const [reason, message, ...quotes] = JSON.parse(r.stdout) as string[];
      assert.equal(reason, 'bad-field');
      assert.match(message, /"job"/);
      for (const q of quotes) assert.ok(q.length <= 80, q);
    });

    it('is short whatever a peer sent, and never throws', () => {
      const huge = '\u0001'.repeat(1_000_000);
      for (const x of [
        huge,
        Array.from({ length: 100_000 }, (_, i) => i),
        { toString: 1, valueOf: 2 },
        Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`k${i}`, 'v'.repeat(1000)])),
        new Map(),
        7n,
        null,
      ]) {
        const q = quoteValue(x);
        assert.ok(q.length <= 80, `${q.length}: ${q}`);
      }
      assert.equal(quoteValue('abc'), '"abc"');
      assert.equal(quoteValue([1, 2, 3]), '[1,2,3]');
      assert.match(quoteValue(Array.from({ length: 100 }, (_, i) => i)), /^\[0,1,2,3,4,5,6,7,… 100 items\]$/);
      const hostile = new Proxy(
        {},
        {
          ownKeys: () => {
            throw new Error('no');
          },
        },
      );
      assert.equal(quoteValue(hostile), 'an unprintable value');
    });
  });

  describe('plain values', () => {
    it('round-trips a control map as a plain object', () => {
      const v = {
        verb: 'ping',
        n: 3,
        list: [1, 'a', null],
        deep: { x: 1.25 },
        t: Date.now(),
        big: 2 ** 40,
        f: new Float32Array([1.5]),
        u: new Uint8Array([7]),
        nan: NaN,
      };
      assert.deepEqual(decodeValue(encodeValue(v)), v);
    });

    it('reports a truncated value with a typed error', () => {
      const b = encodeValue({ verb: 'ping', pad: 'x'.repeat(40) });
      assert.throws(
        () => decodeValue(b.subarray(0, b.length - 4)),
        (e: unknown) => e instanceof CodecError && e.reason === 'truncated',
      );
    });
  });
});
