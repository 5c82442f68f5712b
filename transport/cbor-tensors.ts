// This process's cbor-x, as Baton uses it: the dtypes a tensor travels as and their
// little-endian RFC 8746 typed-array tags, one encoder and one decoder, and the tag
// decoders that replace cbor-x's own (a whole number of elements, a view where aligned).

import type * as CborX from 'cbor-x' with { 'resolution-mode': 'import' };
import type { AnyTypedArray, DType } from './envelope';
import { quoteValue } from '../base/quote';
import { CodecError } from './codec-error';

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
export const DTYPE_INFO: Readonly<Record<DType, DTypeInfo>> = {
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

export const IS_LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
const cborOptions = { useRecords: false, mapsAsObjects: true, tagUint8Array: true };
// cbor-x's typings describe its ESM entry; at run time require() gets the CommonJS build.

const { Encoder, Decoder, addExtension } = require('cbor-x') as typeof CborX;
export const encoder = new Encoder(cborOptions);
export const decoder = new Decoder(cborOptions);

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

/** The typed-array classes a tensor's data may be. */
export const TENSOR_CTORS: ReadonlySet<unknown> = new Set(Object.values(DTYPE_INFO).map((i) => i.ctor));
