// Fuzzing the pure decode and validate paths of what arrives from the network: the
// envelope and value codec, the tap's decoder, the launcher's check of a trace batch's
// events, a host request's config and a checkpoint's stage file. Valid messages made by
// the project's own encoders are mutated (test/fuzz-gen.ts) and fed through each; the
// property: only the path's own rejection comes out (never a TypeError, RangeError or a
// hang), small messages decode quickly, and a valid message afterwards decodes as before.

import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { CodecError, decodeEnvelope, decodeValue, encodeEnvelope, encodeValue } from '../transport/codec';
import { ENVELOPE_VERSION, Envelope } from '../transport/envelope';
import { formatTapLine, tapLine } from '../cli/tap';
import { eventProblem } from '../stage/events';
import { checkConfigShape } from '../job/config-shape';
import { resolveConfig } from '../job/config';
import { JobConfigError } from '../job/wire-stage';
import { CheckpointError, checkFiles } from '../job/checkpoint';
import { runJob } from '../job/run-local';
import { FUZZ_SEED, Rng, cases, malformed } from './fuzz-gen';

/** Valid messages of every kind the stages and the coordinator send, from the project's encoders. */
export function validEnvelopes(): Uint8Array[] {
  const base = {
    v: ENVELOPE_VERSION,
    job: 'fz',
    iteration: 0,
    src: 0,
    dst: 1,
    seq: 3,
    sentAt: 1234.5,
    bytes: 0,
    launch: 'abc123',
    tensors: [],
  };
  const envs: Envelope[] = [
    { ...base, kind: 'control', mb: -1, chunk: -1, dir: 'control', src: -1, body: { verb: 'start' } },
    { ...base, kind: 'data', mb: 2, chunk: 0, dir: 'forward', src: -1, dst: 0 },
    {
      ...base,
      kind: 'activation',
      mb: 1,
      chunk: 0,
      dir: 'forward',
      commMs: 0.25,
      tensors: [{ dtype: 'float32', shape: [2, 3], data: new Float32Array([1, 2, 3, 4, 5, 6]) }],
    },
    {
      ...base,
      kind: 'gradient',
      mb: 1,
      chunk: 1,
      dir: 'backward',
      src: 1,
      dst: 0,
      tensors: [
        { dtype: 'int16', shape: [3], data: new Int16Array([1, -2, 3]) },
        { dtype: 'uint8', shape: [1, 2], data: new Uint8Array([7, 8]) },
      ],
    },
    {
      ...base,
      kind: 'report',
      mb: -1,
      chunk: -1,
      dir: 'control',
      dst: -1,
      body: { peakInflight: 2, loss: 1.5, params: { w: new Float32Array(4) }, names: ['a', 'b'] },
    },
  ];
  return envs.map((e) => encodeEnvelope(e));
}

/** A few events of every type, as a stage's trace batch carries them. */
export async function validEvents() {
  const r = await runJob(resolveConfig({ job: 'fz', stages: 2, microbatches: 2, jitter: 'paper' }), {
    clock: 'virtual',
  });
  const byType = new Map<string, unknown>();
  for (const e of r.events) if (!byType.has(e.type)) byType.set(e.type, e);
  byType.set('reject', { type: 'reject', t: 1, stage: 0, iteration: 0, reason: 'malformed', detail: 'x' });
  return [...byType.values()];
}

/** CPU ms of this process since `from` (process.cpuUsage()): unlike wall time, not inflated
 * while other processes hold the cores, so a slow case means a slow input, not a busy machine. */
export function cpuMsSince(from: NodeJS.CpuUsage): number {
  const d = process.cpuUsage(from);
  return (d.user + d.system) / 1000;
}

/** Runs `n` cases of `body`, collecting (not stopping at) the failures; each case's CPU time is measured. */
export function campaign(name: string, n: number, body: (rng: Rng, i: number) => void, slowMs = 250): void {
  const rng = new Rng(FUZZ_SEED ^ hash(name));
  const failures: string[] = [];
  for (let i = 0; i < n && failures.length < 10; i++) {
    const t0 = process.cpuUsage();
    try {
      body(rng, i);
    } catch (err) {
      failures.push(`case ${i}: ${(err as Error)?.stack?.split('\n').slice(0, 12).join(' | ') ?? String(err)}`);
    }
    const ms = cpuMsSince(t0);
    if (ms > slowMs) failures.push(`case ${i}: took ${ms.toFixed(0)} ms of CPU`);
  }
  assert.deepEqual(failures, [], `${name} (seed ${FUZZ_SEED}, ${n} cases)`);
}

function hash(s: string): number {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
  return h >>> 0;
}

/** `f` throws only errors of `ok` (or returns); anything else is rethrown with the input. */
export function onlyRejects<T>(bytes: Uint8Array, f: () => T, ok: (e: unknown) => boolean): T | undefined {
  try {
    return f();
  } catch (err) {
    if (ok(err)) return undefined;
    const hex = Buffer.from(bytes.subarray(0, 64)).toString('hex');
    throw new Error(
      `${(err as Error)?.name}: ${(err as Error)?.message?.slice(0, 300)} on ${bytes.length} bytes ${hex}`,
      { cause: err },
    );
  }
}

const isCodecError = (e: unknown) => e instanceof CodecError;

/** A decoded value with its typed arrays as text (an untagged byte string decodes as a Buffer, and goes back tagged). */
function plain(x: unknown): unknown {
  if (ArrayBuffer.isView(x))
    return `${x instanceof Uint8Array ? 'Uint8Array' : x.constructor.name}:${Buffer.from(x.buffer, x.byteOffset, x.byteLength).toString('hex')}`;
  if (Array.isArray(x)) return x.map(plain);
  if (x !== null && typeof x === 'object') return Object.fromEntries(Object.entries(x).map(([k, v]) => [k, plain(v)]));
  return x;
}

describe('fuzz: the codec', () => {
  const valid = validEnvelopes();

  it('decodeEnvelope refuses every malformed message with a CodecError, and what it takes re-encodes', () => {
    campaign('envelope', cases(1000), (rng) => {
      const bytes = malformed(rng.pick(valid), rng);
      const e = onlyRejects(bytes, () => decodeEnvelope(bytes), isCodecError);
      if (e) {
        // What the decoder accepts is an envelope the encoder also takes, and it decodes back to itself.
        const again = decodeEnvelope(encodeEnvelope(e));
        assert.deepEqual(plain(again), plain(e));
      }
      // The decoder is not left in a state that spoils the next message.
      assert.equal(decodeEnvelope(valid[2]).tensors[0].data.length, 6);
    });
  });

  it('decodeValue refuses every malformed value with a CodecError', () => {
    campaign('value', cases(1000), (rng) => {
      const bytes = malformed(rng.pick(valid), rng);
      onlyRejects(bytes, () => decodeValue(bytes), isCodecError);
      assert.equal((decodeValue(encodeValue({ a: [1] })) as { a: number[] }).a[0], 1);
    });
  });

  it('the tap prints a line for anything on any subject, never throwing', () => {
    const subjects = [
      'baton.fz.activation.1',
      'baton.fz.trace.0',
      'baton._nodes.n1',
      'baton._jobs.fz',
      'baton._nodes.reply.x',
      'x',
      'baton',
    ];
    const batch = encodeValue({
      events: [{ type: 'wait', t: 1, stage: 0, iteration: 0, ms: 1, reason: 'binding' }],
      launch: 'abc',
    });
    const pool = [
      ...valid,
      batch,
      encodeValue({ verb: 'host', reply: 'baton._nodes.reply.x', config: { job: 'fz' }, stages: [0] }),
    ];
    campaign('tap', cases(700), (rng) => {
      const bytes = malformed(rng.pick(pool), rng);
      const line = tapLine(rng.pick(subjects), bytes);
      formatTapLine(line);
      JSON.stringify(line);
    });
  });
});

describe('fuzz: what the launcher and the agents check', () => {
  let events: unknown[] = [];
  before(async () => {
    events = await validEvents();
  });

  it('eventProblem judges any decoded value without throwing', () => {
    campaign('events', cases(600), (rng) => {
      const bytes = malformed(encodeValue(rng.pick(events)), rng);
      let v: unknown;
      try {
        v = decodeValue(bytes);
      } catch {
        return;
      }
      const problem = eventProblem(v);
      assert.ok(problem === null || typeof problem === 'string');
    });
  });

  it("a host request's config is refused with a JobConfigError, never another error", () => {
    const cfg = encodeValue(resolveConfig({ job: 'fz', stages: 2, microbatches: 4 }));
    campaign('config', cases(500), (rng) => {
      const bytes = malformed(cfg, rng);
      let v: unknown;
      try {
        v = decodeValue(bytes);
      } catch {
        return;
      }
      onlyRejects(
        bytes,
        () => resolveConfig(checkConfigShape(v)),
        (e) => e instanceof JobConfigError || (e as Error).name === 'SubjectError',
      );
    });
  });

  it("a checkpoint's damaged stage file is refused with a CheckpointError", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-fuzz-'));
    try {
      const snap = encodeValue({
        params: { w: new Float32Array([1, 2]), b: new Float32Array(1) },
        optimizer: [{ step: 1, m: { w: new Float32Array(2) } }],
      });
      campaign('checkpoint', cases(150), (rng) => {
        const bytes = malformed(snap, rng);
        const file = path.join(dir, 'stage-0-it1.cbor');
        fs.writeFileSync(file, bytes);
        const meta = {
          nextIteration: 1,
          stages: 1,
          chunks: 1,
          checksum: 'c',
          corpus: 'k',
          files: { 'stage-0-it1.cbor': require('crypto').createHash('sha256').update(bytes).digest('hex') },
          config: {},
        };
        onlyRejects(
          bytes,
          () => checkFiles(dir, meta, { corpus: 'k', checksumOf: () => 'c' }),
          (e) => e instanceof CheckpointError,
        );
      });
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
