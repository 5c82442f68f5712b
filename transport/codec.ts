// The wire codec: an Envelope <-> one CBOR map (RFC 8949), tensors as RFC 8746
// typed-array tags. The scalar fields are encoded by cbor-x; the `tensors` entry is
// written here so that every tensor's bytes start at an 8-byte aligned offset of the
// message: each tensor map carries a `pad` byte string (0-7 bytes) sized for that.
// Decoding an aligned message (byteOffset of the input a multiple of 8, true for any
// freshly allocated buffer) therefore yields typed arrays that are views into the
// input buffer, with no copy; a misaligned input still decodes, with cbor-x copying
// each tensor. Everything decoded is validated; failures are CodecErrors.
// This module is the entry point; its parts are cbor-tensors.ts (cbor-x, dtypes and tag
// decoders), tensor-layout.ts (the aligned tensor maps), envelope-check.ts (header and
// tensor checks), plain-data.ts and codec-error.ts.
//
// Not modelled: big-endian hosts (encoding refuses there; decoding works), tensors
// over 4 GiB, compression, schema evolution beyond the single version number.

import type { Envelope, TensorPayload } from './envelope';
import { isPlainObject, quoteValue } from '../base/quote';
import { CodecError } from './codec-error';
import { IS_LITTLE_ENDIAN, decoder, encoder } from './cbor-tensors';
import { checkHeader, checkTensor, readTensor } from './envelope-check';
import { plainDataProblem } from './plain-data';
import { KEY_TENSORS, headLength, readMapHead, tensorLayout, writeHead, writeTensor } from './tensor-layout';

export { CodecError, CodecErrorReason } from './codec-error';
export { DTYPES, bytesPerElement, isDType } from './cbor-tensors';
export { MAX_COMM_MS } from './envelope-check';
export { MAX_NESTING } from './plain-data';

/** Default largest message, encoded or decoded (matches the generated nats-server max_payload). */
export const DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024;

export interface CodecOptions {
  /** Largest message in bytes; default DEFAULT_MAX_MESSAGE_BYTES (64 MiB). */
  maxBytes?: number;
}

const UNFILLED_ALLOC_BYTES = 64 * 1024;

// ---------- encoding ----------

interface Plan {
  readonly tensors: readonly TensorPayload[];
  readonly count: number;
  readonly rest: Uint8Array;
  readonly pads: number[];
  readonly size: number;
}

/** The checked header, bytes and tensor layout of envelope `e` (its size at most opts.maxBytes). */
function plan(e: Envelope, opts: CodecOptions): Plan {
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
  const pads = tensors.map((t) => {
    const l = tensorLayout(t, size);
    size = l.dataStart + t.data.byteLength;
    return l.pad;
  });
  if (size > maxBytes)
    throw new CodecError('oversize', `encodeEnvelope: message would be ${size} bytes, over the limit of ${maxBytes}`);
  return { tensors, count, rest, pads, size };
}

/** Write `p`'s map head, header and tensors head into `out` from 0; returns the position after them. */
function writeHeader(out: Uint8Array, p: Plan): number {
  let pos = writeHead(out, 0, 5, p.count + 1);
  out.set(p.rest, pos);
  pos += p.rest.length;
  out.set(KEY_TENSORS, pos);
  pos += KEY_TENSORS.length;
  return writeHead(out, pos, 4, p.tensors.length);
}

/** Encode an envelope; tensor bytes land 8-byte aligned within the returned buffer (which starts at offset 0). */
export function encodeEnvelope(e: Envelope, opts: CodecOptions = {}): Uint8Array {
  const p = plan(e, opts);
  // Big messages skip the zero-fill (every byte is written below); small ones use a plain
  // array. Either way the message starts at offset 0 of its own ArrayBuffer.
  const out =
    p.size >= UNFILLED_ALLOC_BYTES
      ? new Uint8Array(Buffer.allocUnsafeSlow(p.size).buffer, 0, p.size)
      : new Uint8Array(p.size);
  let pos = writeHeader(out, p);
  p.tensors.forEach((t, i) => {
    pos = writeTensor(out, pos, t, p.pads[i]);
  });
  if (pos !== p.size) throw new Error(`encodeEnvelope: internal layout error, wrote ${pos} of ${p.size} bytes`);
  return out;
}

/** `parts` joined into one message, at offset 0 of its own buffer (aligned, as encodeEnvelope's). */
export function joinParts(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, x) => n + x.byteLength, 0));
  let pos = 0;
  for (const x of parts) {
    out.set(x, pos);
    pos += x.byteLength;
  }
  return out;
}

/**
 * The bytes encodeEnvelope(e) returns, as pieces in order: the CBOR around the tensors in
 * fresh buffers, and each tensor's data as a view of the caller's array (not copied). For a
 * transport that writes the pieces out one after the other (NatsBus.publishParts): the one
 * copy of a tensor is then the transport's own. The views must not change until it has.
 */
export function encodeEnvelopeParts(e: Envelope, opts: CodecOptions = {}): Uint8Array[] {
  const p = plan(e, opts);
  const dataBytes = p.tensors.reduce((n, t) => n + t.data.byteLength, 0);
  const skeleton = new Uint8Array(p.size - dataBytes);
  let pos = writeHeader(skeleton, p);
  let from = 0;
  const parts: Uint8Array[] = [];
  p.tensors.forEach((t, i) => {
    pos = writeTensor(skeleton, pos, t, p.pads[i], false);
    parts.push(skeleton.subarray(from, pos), new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
    from = pos;
  });
  if (parts.length === 0) parts.push(skeleton);
  if (pos !== skeleton.length) throw new Error(`encodeEnvelopeParts: internal layout error`);
  return parts;
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
