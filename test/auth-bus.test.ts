import { strict as assert } from 'assert';
import { AuthBus, AuthRejectReason } from '../transport/auth-bus';
import { Sealer, keyText, newJobKey, openSeal, parseKey } from '../transport/auth-seal';
import { LocalBus } from '../transport/local-bus';
import { NatsBus } from '../transport/nats-bus';
import type { BusMeta } from '../transport/bus';
import { decodeEnvelope, encodeEnvelope, encodeEnvelopeParts, joinParts } from '../transport/codec';
import { ENVELOPE_VERSION } from '../transport/envelope';
import { natsServerForSuite, until } from './nats-server-fixture';

const bytes = (s: string) => new Uint8Array(Buffer.from(s));

describe('message seals', () => {
  it('open under the key they were made with, for the subject and bytes they were made for', () => {
    const key = newJobKey();
    const s = new Sealer(key, 'stage:1');
    const seal = s.seal('baton.j.report', bytes('hello'));
    assert.deepEqual(
      { ...openSeal(key, 'baton.j.report', bytes('hello'), seal), sealer: '' },
      { label: 'stage:1', count: 1, sealer: '' },
    );
    assert.equal(openSeal(newJobKey(), 'baton.j.report', bytes('hello'), seal), null);
    assert.equal(openSeal(key, 'baton.j.trace.0', bytes('hello'), seal), null);
    assert.equal(openSeal(key, 'baton.j.report', bytes('hellp'), seal), null);
    const relabelled = Uint8Array.from(seal);
    relabelled[relabelled.length - 1] ^= 1;
    assert.equal(openSeal(key, 'baton.j.report', bytes('hello'), relabelled), null);
    assert.equal(openSeal(key, 'baton.j.report', bytes('hello'), seal.subarray(0, 20)), null);
    assert.equal(openSeal(key, 'baton.j.report', bytes('hello'), undefined), null);
  });

  it('never repeat a nonce: each seal of one sealer counts one more', () => {
    const key = newJobKey();
    const s = new Sealer(key, 'x');
    const counts = [0, 1, 2].map(() => openSeal(key, 'a', bytes(''), s.seal('a', bytes('')))!.count);
    assert.deepEqual(counts, [1, 2, 3]);
  });

  it('write keys as 43 base64url characters and read back only those', () => {
    const key = newJobKey();
    assert.deepEqual(parseKey(`${keyText(key)}\n`), key);
    assert.equal(parseKey('short'), null);
    assert.equal(parseKey(`${keyText(key)}A`), null);
  });
});

function authPair(inner: LocalBus | NatsBus, key = newJobKey()) {
  const refusals: [AuthRejectReason, string][] = [];
  const a = new AuthBus(inner, key, 'a');
  const b = new AuthBus(inner, key, 'b', { onReject: (reason, _s, detail) => refusals.push([reason, detail]) });
  return { a, b, refusals };
}

describe('an AuthBus', () => {
  it('delivers what a peer with the key sealed, with its sender, and refuses the rest by reason', () => {
    const local = new LocalBus();
    const { a, b, refusals } = authPair(local);
    const got: [string, string | undefined][] = [];
    b.subscribe('baton.j.>', (_s, data, meta?: BusMeta) => got.push([Buffer.from(data).toString(), meta?.sender]));
    a.publish('baton.j.report', bytes('genuine'));
    local.publish('baton.j.report', bytes('forged, unsealed'));
    const stranger = new AuthBus(local, newJobKey(), 'a');
    stranger.publish('baton.j.report', bytes('forged, other key'));
    assert.deepEqual(got, [['genuine', 'a']]);
    assert.deepEqual(
      refusals.map((r) => r[0]),
      ['unauthenticated', 'unauthenticated'],
    );
    assert.equal(b.rejected.unauthenticated, 2);
  });

  it('refuses a replayed message once per subscription, and the first genuine arrival is the one taken', () => {
    const local = new LocalBus();
    const { a, b, refusals } = authPair(local);
    let captured: [string, Uint8Array, Uint8Array] | null = null;
    local.subscribe('baton.j.>', (s, d, m) => (captured ??= [s, d, m!.seal!]));
    const got: string[] = [];
    b.subscribe('baton.j.>', (_s, d) => got.push(Buffer.from(d).toString()));
    a.publish('baton.j.activation.1', bytes('one'));
    local.publish(...captured!);
    a.publish('baton.j.activation.1', bytes('two'));
    assert.deepEqual(got, ['one', 'two']);
    assert.deepEqual(refusals, [['replay', 'message 1 of a again (last taken: 1)']]);
  });

  describe('over a real nats-server', function () {
    this.timeout(20000);
    const server = natsServerForSuite();

    /** Runs `body` on two connections to the server behind AuthBuses of one new key, and closes them after. */
    async function sealedPair(
      pubLabel: string,
      subLabel: string,
      body: (p: { key: Uint8Array; pn: NatsBus; sn: NatsBus; pub: AuthBus; sub: AuthBus }) => Promise<void>,
    ): Promise<void> {
      const [pn, sn] = [await NatsBus.connect(server().url), await NatsBus.connect(server().url)];
      try {
        const key = newJobKey();
        await body({ key, pn, sn, pub: new AuthBus(pn, key, pubLabel), sub: new AuthBus(sn, key, subLabel) });
      } finally {
        await Promise.all([pn.close(), sn.close()]);
      }
    }

    it('carries the seal in a header, beside the bytes, and refuses a plain nats client', () =>
      sealedPair('launcher', 'node:n', async ({ pn, sn, pub, sub }) => {
        const got: string[] = [];
        sub.subscribe('baton.j.report', (_s, d, m) => got.push(`${Buffer.from(d).toString()} from ${m?.sender}`));
        await sn.flush();
        pn.publish('baton.j.report', bytes('forged'));
        pub.publish('baton.j.report', bytes('genuine'));
        await until(() => got.length + sub.rejectedCount >= 2, 'both messages');
        assert.deepEqual(got, ['genuine from launcher']);
        assert.equal(sub.rejected.unauthenticated, 1);
      }));

    it('seals a message sent as parts over every byte, so one altered byte or a plain copy is refused', () =>
      sealedPair('node:a', 'node:b', async ({ key, pn, sn, pub, sub }) => {
        const env = {
          v: ENVELOPE_VERSION,
          job: 'j',
          kind: 'activation' as const,
          iteration: 0,
          mb: 1,
          chunk: 0,
          dir: 'forward' as const,
          src: 0,
          dst: 1,
          seq: 3,
          sentAt: 1,
          bytes: 4096,
          tensors: [{ dtype: 'float32' as const, shape: [32, 32], data: new Float32Array(1024).map((_, i) => i) }],
        };
        const parts = encodeEnvelopeParts(env);
        const whole = encodeEnvelope(env);
        assert.deepEqual(Buffer.from(joinParts(parts)), Buffer.from(whole), 'the parts are the bytes of the message');
        assert.ok(parts.length > 1 && parts[1].buffer === env.tensors[0].data.buffer, 'the tensor is not copied');
        const got: Uint8Array[] = [];
        sub.subscribe('baton.j.activation.1', (_s, d) => got.push(new Uint8Array(d)));
        await sn.flush();
        pub.publishParts('baton.j.activation.1', parts);
        // The same message with one tensor byte altered, under a genuine seal of the original: refused.
        const seal = new Sealer(key, 'node:a').seal('baton.j.activation.1', parts);
        const altered = joinParts(parts);
        altered[altered.length - 1] ^= 1;
        pn.publish('baton.j.activation.1', altered, seal);
        await until(() => got.length + sub.rejectedCount >= 2, 'both messages');
        assert.equal(got.length, 1);
        assert.deepEqual(Buffer.from(got[0]), Buffer.from(whole));
        assert.equal(decodeEnvelope(got[0]).tensors[0].data[1023], 1023);
        assert.equal(sub.rejected.unauthenticated, 1);
      }));
  });
});
