// Where the bytes of an encoded envelope's tensors go: CBOR heads written by hand, and
// each tensor map laid out so its data starts 8-byte aligned in the message (a `pad`
// byte string of 0-7 bytes before it). codec.ts encodeEnvelope sizes and writes with these.

import type { DType, TensorPayload } from './envelope';
import { CodecError } from './codec-error';
import { DTYPES, DTYPE_INFO } from './cbor-tensors';

const TENSOR_ALIGN = 8;

const ascii = (s: string): Uint8Array => Uint8Array.from(s, (c) => c.charCodeAt(0));
const textItem = (s: string): Uint8Array => {
  const b = new Uint8Array(1 + s.length);
  b[0] = 0x60 + s.length;
  b.set(ascii(s), 1);
  return b;
};
export const KEY_TENSORS = textItem('tensors');
const KEY_DTYPE = textItem('dtype');
const KEY_SHAPE = textItem('shape');
const KEY_PAD = textItem('pad');
const KEY_DATA = textItem('data');
const DTYPE_ITEMS = Object.fromEntries(DTYPES.map((d) => [d, textItem(d)])) as Record<DType, Uint8Array>;

export function headLength(n: number): number {
  return n < 24 ? 1 : n < 0x100 ? 2 : n < 0x10000 ? 3 : n < 0x100000000 ? 5 : 9;
}

export function writeHead(out: Uint8Array, pos: number, major: number, n: number): number {
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
export function tensorLayout(t: TensorPayload, start: number): { pad: number; dataStart: number } {
  let pos = start + 1 + KEY_DTYPE.length + DTYPE_ITEMS[t.dtype].length + KEY_SHAPE.length + headLength(t.shape.length);
  for (const d of t.shape) pos += headLength(d);
  pos += KEY_PAD.length + 1; // the pad byte string's head (pad < 24)
  const afterPad = KEY_DATA.length + 2 + headLength(t.data.byteLength); // key, tag (0xd8 nn), bstr head
  const pad = (TENSOR_ALIGN - ((pos + afterPad) % TENSOR_ALIGN)) % TENSOR_ALIGN;
  return { pad, dataStart: pos + pad + afterPad };
}

/** Write tensor `t`'s map at `pos`, with the pad tensorLayout chose for it; returns the position after its data
 * (without `withData`: up to its data, which is left for the caller to send after these bytes). */
export function writeTensor(out: Uint8Array, pos: number, t: TensorPayload, pad: number, withData = true): number {
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
  out[pos++] = 0x40 + pad;
  out.fill(0, pos, pos + pad);
  pos += pad;
  out.set(KEY_DATA, pos);
  pos += KEY_DATA.length;
  out[pos++] = 0xd8;
  out[pos++] = DTYPE_INFO[t.dtype].tag;
  pos = writeHead(out, pos, 2, t.data.byteLength);
  if (!withData) return pos;
  out.set(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength), pos);
  pos += t.data.byteLength;
  return pos;
}

/** The entry count and head length of the definite map cbor-x encoded a header as. */
export function readMapHead(b: Uint8Array): { count: number; headLen: number } {
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
