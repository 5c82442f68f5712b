// The wire codec: an Envelope <-> one CBOR map (RFC 8949), tensors as RFC 8746
// typed-array tags. The scalar fields are encoded by cbor-x; the `tensors` entry is
// written here so that every tensor's bytes start at an 8-byte aligned offset of the
// message: each tensor map carries a `pad` byte string (0-7 bytes) sized for that.
// Decoding an aligned message (byteOffset of the input a multiple of 8, true for any
// freshly allocated buffer) therefore yields typed arrays that are views into the
// input buffer, with no copy; a misaligned input still decodes, with cbor-x copying
// each tensor. Everything decoded is validated; failures are CodecErrors.
//
// Not modelled: big-endian hosts (encoding refuses there; decoding works), tensors
// over 4 GiB, compression, schema evolution beyond the single version number.

import type * as CborX from 'cbor-x' with { 'resolution-mode': 'import' };
import { ENVELOPE_VERSION, LAUNCH_EXPECTED, LAUNCH_RE, MAX_JOB_NAME } from './envelope';
import type { AnyTypedArray, DType, Direction, Envelope, TensorPayload } from './envelope';
import { isPlainObject, quoteValue } from '../base/quote';
import { TOKEN_RE } from '../base/token';

export type CodecErrorReason =
  'malformed' | 'truncated' | 'version' | 'missing-field' | 'bad-field' | 'dtype' | 'shape' | 'oversize';

export class CodecError extends Error {
  override name = 'CodecError';
  constructor(
    readonly reason: CodecErrorReason,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Default largest message, encoded or decoded (matches the generated nats-server max_payload). */
export const DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024;

export interface CodecOptions {
  /** Largest message in bytes; default DEFAULT_MAX_MESSAGE_BYTES (64 MiB). */
  maxBytes?: number;
}

type TypedArrayCtor = {
  new (buffer: ArrayBufferLike, byteOffset: number, length: number): AnyTypedArray;
  BYTES_PER_ELEMENT: number;
};

interface DTypeInfo {
  readonly ctor: TypedArrayCtor;
  readonly tag: number;
  readonly name: DType;
}

// Little-endian RFC 8746 tags; uint8 uses tag 64 so it decodes as a Uint8Array, not a Buffer.
const DTYPE_INFO: Readonly<Record<DType, DTypeInfo>> = {
  float32: { ctor: Float32Array, tag: 85, name: 'float32' },
  float64: { ctor: Float64Array, tag: 86, name: 'float64' },
  int32: { ctor: Int32Array, tag: 78, name: 'int32' },
  int16: { ctor: Int16Array, tag: 77, name: 'int16' },
  int8: { ctor: Int8Array, tag: 72, name: 'int8' },
  uint32: { ctor: Uint32Array, tag: 70, name: 'uint32' },
  uint16: { ctor: Uint16Array, tag: 69, name: 'uint16' },
  uint8: { ctor: Uint8Array, tag: 64, name: 'uint8' },
};

export const DTYPES: readonly DType[] = Object.keys(DTYPE_INFO) as DType[];

export function isDType(x: unknown): x is DType {
  return typeof x === 'string' && Object.prototype.hasOwnProperty.call(DTYPE_INFO, x);
}

export function bytesPerElement(dtype: DType): number {
  return DTYPE_INFO[dtype].ctor.BYTES_PER_ELEMENT;
}

const TENSOR_ALIGN = 8;
const UNFILLED_ALLOC_BYTES = 64 * 1024;
const MAX_RANK = 32;
const IS_LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
const cborOptions = { useRecords: false, mapsAsObjects: true, tagUint8Array: true };
// cbor-x's typings describe its ESM entry; at run time require() gets the CommonJS build.

const { Encoder, Decoder, addExtension } = require('cbor-x') as typeof CborX;
const encoder = new Encoder(cborOptions);
const decoder = new Decoder(cborOptions);

// cbor-x's own typed-array tag decoders make a view of byteLength >> k elements, dropping a
// peer's extra bytes, and an empty array of a tag on anything but a byte string. These take
// their place (for this process's cbor-x: Baton is its only user): a whole number of
// elements in a byte string, a view where aligned, a copy elsewhere (and on a big-endian
// host, values read out of the little-endian bytes). Big-endian tags, which Baton never
// sends, are refused.
for (const { ctor, tag } of Object.values(DTYPE_INFO)) {
  const bpe = ctor.BYTES_PER_ELEMENT;
  const get = `get${ctor.name.slice(0, -'Array'.length)}` as 'getFloat32';
  const decode = (bytes: unknown): AnyTypedArray => {
    if (!(bytes instanceof Uint8Array))
      throw new CodecError(
        'dtype',
        `typed-array tag ${tag} (${ctor.name}) must tag a byte string, got ${quoteValue(bytes)}`,
      );
    if (bytes.byteLength % bpe !== 0)
      throw new CodecError(
        'shape',
        `typed-array tag ${tag} (${ctor.name}) on ${bytes.byteLength} bytes, not a whole number of ${bpe}-byte elements`,
      );
    if (!IS_LITTLE_ENDIAN && bpe > 1) {
      const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      const out = new ctor(new ArrayBuffer(bytes.byteLength), 0, bytes.byteLength / bpe);
      for (let i = 0; i < out.length; i++) out[i] = view[get](i * bpe, true);
      return out;
    }
    return bytes.byteOffset % bpe === 0
      ? new ctor(bytes.buffer, bytes.byteOffset, bytes.byteLength / bpe)
      : new ctor(Uint8Array.prototype.slice.call(bytes).buffer, 0, bytes.byteLength / bpe);
  };
  addExtension({ tag, decode } as unknown as Parameters<typeof addExtension>[0]);
  if (bpe > 1) {
    const bigEndian = (): never => {
      throw new CodecError(
        'dtype',
        `typed-array tag ${tag - 4} (big-endian ${ctor.name}) is not Baton's: its tensors travel little-endian`,
      );
    };
    addExtension({ tag: tag - 4, decode: bigEndian } as unknown as Parameters<typeof addExtension>[0]);
  }
}

const DIRECTIONS: readonly Direction[] = ['forward', 'backward', 'control'];

// ---------- encoding ----------

const ascii = (s: string): Uint8Array => Uint8Array.from(s, (c) => c.charCodeAt(0));
const textItem = (s: string): Uint8Array => {
  const b = new Uint8Array(1 + s.length);
  b[0] = 0x60 + s.length;
  b.set(ascii(s), 1);
  return b;
};
const KEY_TENSORS = textItem('tensors');
const KEY_DTYPE = textItem('dtype');
const KEY_SHAPE = textItem('shape');
const KEY_PAD = textItem('pad');
const KEY_DATA = textItem('data');
const DTYPE_ITEMS = Object.fromEntries(DTYPES.map((d) => [d, textItem(d)])) as Record<DType, Uint8Array>;

function headLength(n: number): number {
  return n < 24 ? 1 : n < 0x100 ? 2 : n < 0x10000 ? 3 : n < 0x100000000 ? 5 : 9;
}

function writeHead(out: Uint8Array, pos: number, major: number, n: number): number {
  const m = major << 5;
  if (n < 24) {
    out[pos] = m | n;
    return pos + 1;
  }
  if (n < 0x100) {
    out[pos] = m | 24;
    out[pos + 1] = n;
    return pos + 2;
  }
  if (n < 0x10000) {
    out[pos] = m | 25;
    out[pos + 1] = n >>> 8;
    out[pos + 2] = n & 0xff;
    return pos + 3;
  }
  const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
  if (n < 0x100000000) {
    out[pos] = m | 26;
    view.setUint32(pos + 1, n);
    return pos + 5;
  }
  out[pos] = m | 27;
  view.setUint32(pos + 1, Math.floor(n / 0x100000000));
  view.setUint32(pos + 5, n >>> 0);
  return pos + 9;
}

/** Bytes of one tensor map before its data, given where the map starts; also the pad chosen. */
function tensorLayout(t: TensorPayload, start: number): { pad: number; dataStart: number } {
  let pos = start + 1 + KEY_DTYPE.length + DTYPE_ITEMS[t.dtype].length + KEY_SHAPE.length + headLength(t.shape.length);
  for (const d of t.shape) pos += headLength(d);
  pos += KEY_PAD.length + 1; // the pad byte string's head (pad < 24)
  const afterPad = KEY_DATA.length + 2 + headLength(t.data.byteLength); // key, tag (0xd8 nn), bstr head
  const pad = (TENSOR_ALIGN - ((pos + afterPad) % TENSOR_ALIGN)) % TENSOR_ALIGN;
  return { pad, dataStart: pos + pad + afterPad };
}

/** Encode an envelope; tensor bytes land 8-byte aligned within the returned buffer (which starts at offset 0). */
export function encodeEnvelope(e: Envelope, opts: CodecOptions = {}): Uint8Array {
  const maxBytes = opts.maxBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  if (!IS_LITTLE_ENDIAN)
    throw new CodecError(
      'malformed',
      'encodeEnvelope: big-endian hosts are not supported (tensor tags are little-endian)',
    );
  const header = checkHeader(e as unknown as Record<string, unknown>, 'encodeEnvelope');
  const tensors: readonly TensorPayload[] = e.tensors;
  if (!Array.isArray(tensors as unknown))
    throw new CodecError('missing-field', `encodeEnvelope: tensors must be an array, got ${quoteValue(tensors)}`);
  tensors.forEach((t, i) => checkTensor(t, `encodeEnvelope: tensors[${i}]`));
  const headBytes = encoder.encode(header);
  const { count, headLen } = readMapHead(headBytes);
  const rest = headBytes.subarray(headLen);

  let size = headLength(count + 1) + rest.length + KEY_TENSORS.length + headLength(tensors.length);
  const layouts = tensors.map((t) => {
    const l = tensorLayout(t, size);
    size = l.dataStart + t.data.byteLength;
    return l;
  });
  if (size > maxBytes)
    throw new CodecError('oversize', `encodeEnvelope: message would be ${size} bytes, over the limit of ${maxBytes}`);

  // Big messages skip the zero-fill (every byte is written below); small ones use a plain
  // array. Either way the message starts at offset 0 of its own ArrayBuffer.
  const out =
    size >= UNFILLED_ALLOC_BYTES ? new Uint8Array(Buffer.allocUnsafeSlow(size).buffer, 0, size) : new Uint8Array(size);
  let pos = writeHead(out, 0, 5, count + 1);
  out.set(rest, pos);
  pos += rest.length;
  out.set(KEY_TENSORS, pos);
  pos += KEY_TENSORS.length;
  pos = writeHead(out, pos, 4, tensors.length);
  tensors.forEach((t, i) => {
    out[pos++] = 0xa4; // map of 4 entries
    out.set(KEY_DTYPE, pos);
    pos += KEY_DTYPE.length;
    out.set(DTYPE_ITEMS[t.dtype], pos);
    pos += DTYPE_ITEMS[t.dtype].length;
    out.set(KEY_SHAPE, pos);
    pos += KEY_SHAPE.length;
    pos = writeHead(out, pos, 4, t.shape.length);
    for (const d of t.shape) pos = writeHead(out, pos, 0, d);
    out.set(KEY_PAD, pos);
    pos += KEY_PAD.length;
    out[pos++] = 0x40 + layouts[i].pad;
    out.fill(0, pos, pos + layouts[i].pad);
    pos += layouts[i].pad;
    out.set(KEY_DATA, pos);
    pos += KEY_DATA.length;
    out[pos++] = 0xd8;
    out[pos++] = DTYPE_INFO[t.dtype].tag;
    pos = writeHead(out, pos, 2, t.data.byteLength);
    out.set(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength), pos);
    pos += t.data.byteLength;
  });
  if (pos !== size) throw new Error(`encodeEnvelope: internal layout error, wrote ${pos} of ${size} bytes`);
  return out;
}

function readMapHead(b: Uint8Array): { count: number; headLen: number } {
  const ai = b[0] & 0x1f;
  if (b[0] >> 5 !== 5 || ai > 26)
    throw new CodecError(
      'malformed',
      `encodeEnvelope: header did not encode as a definite map (first byte 0x${b[0].toString(16)})`,
    );
  if (ai < 24) return { count: ai, headLen: 1 };
  if (ai === 24) return { count: b[1], headLen: 2 };
  if (ai === 25) return { count: (b[1] << 8) | b[2], headLen: 3 };
  return { count: new DataView(b.buffer, b.byteOffset).getUint32(1), headLen: 5 };
}

// ---------- decoding ----------

/** Decode and validate an envelope. Tensors are views into `bytes` when their data is aligned in its buffer. */
export function decodeEnvelope(bytes: Uint8Array, opts: CodecOptions = {}): Envelope {
  const raw = decodeRaw(bytes, opts, 'decodeEnvelope');
  if (!isPlainObject(raw))
    throw new CodecError('malformed', `decodeEnvelope: message is not a map, got ${quoteValue(raw)}`);
  if (!('v' in raw)) throw new CodecError('missing-field', 'decodeEnvelope: missing field "v" (version)');
  const header = checkHeader(raw, 'decodeEnvelope');
  if (!('tensors' in raw)) throw new CodecError('missing-field', 'decodeEnvelope: missing field "tensors"');
  if (!Array.isArray(raw.tensors))
    throw new CodecError('bad-field', `decodeEnvelope: tensors must be an array, got ${quoteValue(raw.tensors)}`);
  const tensors = raw.tensors.map((t: unknown, i: number) => readTensor(t, `decodeEnvelope: tensors[${i}]`));
  return { ...header, tensors };
}

/** Encode a plain value (control maps, configs) as CBOR. */
export function encodeValue(value: unknown): Uint8Array {
  return encoder.encode(value);
}

/** Decode CBOR produced by encodeValue; maps come back as plain objects. Refuses what is not plain data (plainDataProblem). */
export function decodeValue(bytes: Uint8Array, opts: CodecOptions = {}): unknown {
  const v = decodeRaw(bytes, opts, 'decodeValue');
  const problem = plainDataProblem(v);
  if (problem !== null)
    throw new CodecError('bad-field', `decodeValue: the value holds ${problem}, which no Baton peer sends`);
  return v;
}

function decodeRaw(bytes: Uint8Array, opts: CodecOptions, where: string): unknown {
  const maxBytes = opts.maxBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  if (!(bytes instanceof Uint8Array))
    throw new CodecError('malformed', `${where}: expected a Uint8Array, got ${quoteValue(bytes)}`);
  if (bytes.byteLength > maxBytes)
    throw new CodecError('oversize', `${where}: message is ${bytes.byteLength} bytes, over the limit of ${maxBytes}`);
  if (bytes.byteLength === 0) throw new CodecError('truncated', `${where}: empty message`);
  try {
    return decoder.decode(bytes);
  } catch (err) {
    if (err instanceof CodecError) throw new CodecError(err.reason, `${where}: ${err.message}`, { cause: err });
    const incomplete = (err as { incomplete?: boolean }).incomplete === true;
    const msg = err instanceof Error ? err.message : String(err);
    throw new CodecError(
      incomplete ? 'truncated' : 'malformed',
      `${where}: ${incomplete ? 'truncated' : 'malformed'} CBOR in a ${bytes.byteLength}-byte message (${msg})`,
      { cause: err },
    );
  }
}

// ---------- validation (shared by both directions) ----------

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

function checkHeader(o: Record<string, unknown>, where: string): Header {
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

function checkTensor(t: TensorPayload, where: string): void {
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

function readTensor(t: unknown, where: string): TensorPayload {
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

/** How deep plain data may nest: Baton's own messages nest a few levels, and what walks a
 * peer's value recursively later (JSON output, re-encoding) must not run out of stack. */
export const MAX_NESTING = 64;

/**
 * What makes `root` other than plain data, or null. Plain data is what Baton's messages hold:
 * null, undefined, booleans, numbers, strings, arrays, plain maps and the tensor typed arrays
 * (and Buffers), as a tree at most MAX_NESTING deep. Tags make cbor-x build dates, big
 * integers, sets, maps, regular expressions, errors, unknown-tag wrappers and shared or
 * cyclic references from a peer's bytes.
 */
function plainDataProblem(root: unknown): string | null {
  const seen = new Set<object>();
  const todo: unknown[] = [root];
  const depths: number[] = [0];
  while (todo.length > 0) {
    const x = todo.pop();
    const depth = depths.pop()!;
    if (x === null || x === undefined || typeof x === 'boolean' || typeof x === 'number' || typeof x === 'string')
      continue;
    if (typeof x !== 'object') return `a ${typeof x}`;
    if (seen.has(x)) return 'a shared or cyclic reference';
    seen.add(x);
    const nested = Array.isArray(x) || isPlainObject(x);
    if (nested && depth >= MAX_NESTING) return `lists or maps nested over ${MAX_NESTING} deep`;
    if (Array.isArray(x))
      for (let i = 0; i < x.length; i++) {
        todo.push(x[i]);
        depths.push(depth + 1);
      }
    else if (ArrayBuffer.isView(x)) {
      if (!(x instanceof Uint8Array) && !TENSOR_CTORS.has(x.constructor)) return `a ${x.constructor.name}`;
    } else if (isPlainObject(x))
      for (const k in x) {
        todo.push(x[k]);
        depths.push(depth + 1);
      }
    else return quoteValue(x);
  }
  return null;
}

const TENSOR_CTORS: ReadonlySet<unknown> = new Set(Object.values(DTYPE_INFO).map((i) => i.ctor));
