// Validation of an envelope's header and tensors, shared by encoding and decoding: every
// field's presence, type and range, and a tensor's dtype, data and shape agreeing. Errors
// are CodecErrors that say where and quote the bad value.

import { ENVELOPE_VERSION, LAUNCH_EXPECTED, LAUNCH_RE, MAX_JOB_NAME } from './envelope';
import type { AnyTypedArray, DType, Direction, Envelope, TensorPayload } from './envelope';
import { isPlainObject, quoteValue } from '../base/quote';
import { TOKEN_RE } from '../base/token';
import { CodecError } from './codec-error';
import { DTYPES, DTYPE_INFO, bytesPerElement, isDType } from './cbor-tensors';
import { plainDataProblem } from './plain-data';

const MAX_RANK = 32;
const DIRECTIONS: readonly Direction[] = ['forward', 'backward', 'control'];

type Header = Omit<Envelope, 'tensors'>;

/** Longest communication time a message may ask its receiver to hold it: one hour. */
export const MAX_COMM_MS = 3_600_000;

// Validators and their error descriptions are built once, not for every field checked.
const isJob = (x: unknown): boolean => typeof x === 'string' && x.length <= MAX_JOB_NAME && TOKEN_RE.test(x);
const isKind = (x: unknown): boolean => typeof x === 'string' && x.length > 0;
const isDirection = (x: unknown): boolean => DIRECTIONS.includes(x as Direction);
const isFiniteNumber = (x: unknown): boolean => typeof x === 'number' && Number.isFinite(x);
const isLaunch = (x: unknown): boolean => typeof x === 'string' && LAUNCH_RE.test(x);
const isCommMs = (x: unknown): boolean => typeof x === 'number' && x >= 0 && x <= MAX_COMM_MS;
const JOB_EXPECTED = `a string matching ${TOKEN_RE} of at most ${MAX_JOB_NAME} characters`;
const DIRECTION_EXPECTED = `one of ${DIRECTIONS.join(', ')}`;
const COMM_MS_EXPECTED = `a number of ms in [0, ${MAX_COMM_MS}]`;

export function checkHeader(o: Record<string, unknown>, where: string): Header {
  if (o.v !== ENVELOPE_VERSION)
    throw new CodecError(
      'version',
      `${where}: version ${quoteValue(o.v)} is not supported (expected ${ENVELOPE_VERSION})`,
    );
  const h: { -readonly [K in keyof Header]: Header[K] } = {
    v: ENVELOPE_VERSION,
    job: field(o, 'job', where, isJob, JOB_EXPECTED) as string,
    kind: field(o, 'kind', where, isKind, 'a non-empty string') as string,
    iteration: intField(o, 'iteration', where, -1),
    mb: intField(o, 'mb', where, -1),
    chunk: intField(o, 'chunk', where, -1),
    dir: field(o, 'dir', where, isDirection, DIRECTION_EXPECTED) as Direction,
    src: intField(o, 'src', where, -1),
    dst: intField(o, 'dst', where, -1),
    seq: intField(o, 'seq', where, 0),
    sentAt: field(o, 'sentAt', where, isFiniteNumber, 'a finite number') as number,
    bytes: intField(o, 'bytes', where, 0),
  };
  if (o.commMs !== undefined) h.commMs = field(o, 'commMs', where, isCommMs, COMM_MS_EXPECTED) as number;
  if (o.body !== undefined) {
    if (!isPlainObject(o.body))
      throw new CodecError('bad-field', `${where}: field "body" must be a map, got ${quoteValue(o.body)}`);
    const problem = plainDataProblem(o.body);
    if (problem !== null)
      throw new CodecError('bad-field', `${where}: field "body" holds ${problem}, which no Baton peer sends`);
    h.body = o.body;
  }
  if (o.launch !== undefined) h.launch = field(o, 'launch', where, isLaunch, LAUNCH_EXPECTED) as string;
  return h;
}

function field(
  o: Record<string, unknown>,
  name: string,
  where: string,
  ok: (x: unknown) => boolean,
  expected: string,
): unknown {
  const x = o[name];
  if (x === undefined) throw new CodecError('missing-field', `${where}: missing field "${name}"`);
  if (!ok(x)) throw new CodecError('bad-field', `${where}: field "${name}" must be ${expected}, got ${quoteValue(x)}`);
  return x;
}

const INTEGER_AT_LEAST = new Map(
  [-1, 0].map((min) => [
    min,
    {
      ok: (x: unknown): boolean => Number.isSafeInteger(x) && (x as number) >= min,
      expected: `an integer >= ${min}`,
    },
  ]),
);

function intField(o: Record<string, unknown>, name: string, where: string, min: -1 | 0): number {
  const check = INTEGER_AT_LEAST.get(min)!;
  return field(o, name, where, check.ok, check.expected) as number;
}

export function checkTensor(t: TensorPayload, where: string): void {
  if (!isDType(t?.dtype))
    throw new CodecError('dtype', `${where}: dtype ${quoteValue(t?.dtype)} is not one of ${DTYPES.join(', ')}`);
  const info = DTYPE_INFO[t.dtype];
  if (!(t.data instanceof info.ctor))
    throw new CodecError('dtype', `${where}: dtype "${t.dtype}" needs a ${info.ctor.name}, got ${quoteValue(t.data)}`);
  checkShape(t.shape, t.dtype, t.data.byteLength, where);
}

function checkShape(shape: unknown, dtype: DType, byteLength: number, where: string): void {
  if (!Array.isArray(shape) || shape.length > MAX_RANK)
    throw new CodecError(
      'shape',
      `${where}: shape must be an array of at most ${MAX_RANK} dimensions, got ${quoteValue(shape)}`,
    );
  let n = 1;
  for (const d of shape) {
    if (!Number.isSafeInteger(d) || d < 0)
      throw new CodecError(
        'shape',
        `${where}: shape ${quoteValue(shape)} has entry ${quoteValue(d)}, not a non-negative integer`,
      );
    n *= d;
  }
  const want = n * bytesPerElement(dtype);
  if (want !== byteLength)
    throw new CodecError(
      'shape',
      `${where}: shape ${quoteValue(shape)} of ${dtype} needs ${want} bytes, data has ${byteLength}`,
    );
}

export function readTensor(t: unknown, where: string): TensorPayload {
  if (!isPlainObject(t)) throw new CodecError('bad-field', `${where}: tensor must be a map, got ${quoteValue(t)}`);
  for (const k of ['dtype', 'shape', 'data'])
    if (!(k in t)) throw new CodecError('missing-field', `${where}: missing field "${k}"`);
  const dtype = t.dtype;
  if (!isDType(dtype))
    throw new CodecError('dtype', `${where}: dtype ${quoteValue(dtype)} is not one of ${DTYPES.join(', ')}`);
  const info = DTYPE_INFO[dtype];
  let data = t.data;
  // An untagged byte string arrives as a Buffer; accept it for uint8 as a plain view.
  if (dtype === 'uint8' && data instanceof Uint8Array && data.constructor !== Uint8Array)
    data = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (!(data instanceof info.ctor) || (data as AnyTypedArray).constructor !== info.ctor) {
    throw new CodecError(
      'dtype',
      `${where}: dtype "${dtype}" needs ${info.ctor.name} data (tag ${info.tag}), got ${quoteValue(t.data)}`,
    );
  }
  const arr = data as AnyTypedArray;
  checkShape(t.shape, dtype, arr.byteLength, where);
  return { dtype, shape: t.shape as number[], data: arr };
}
