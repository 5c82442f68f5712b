// Message seals: a MAC under a job key, carried beside a message (a NATS header, see
// nats-bus.ts), so a stranger on the server can neither forge nor alter what a job's
// processes take. The MAC is GMAC (AES-256-GCM with the message as additional data and no
// plaintext): a sound MAC while no nonce repeats under one key, and it runs at several GB/s
// with AES-NI, so the data plane is sealed too (SHA-256 HMAC ran at 1 GB/s here; the bus
// bench in bench/README.md). The nonce is the sealer's random 8-byte id and a 4-byte count
// of its messages: a sealer draws a new id before its count wraps, so no nonce repeats, and
// the count lets a receiver refuse a replay (the same sealer's count not above the last).
//
// Seal bytes: version (1) | nonce (12) | tag (16) | sender label (UTF-8, up to 64 bytes).
// Sealed (in order): "baton-seal-1", the label's length and label, the subject's length and
// subject, the message. Not modelled: key rotation within a launch, confidentiality (the
// payload travels in the clear; the job key itself never does).

import { createCipheriv, randomBytes, timingSafeEqual } from 'crypto';

export const JOB_KEY_BYTES = 32;
export const SEAL_VERSION = 1;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const HEAD_BYTES = 1 + NONCE_BYTES + TAG_BYTES;
export const MAX_LABEL_BYTES = 64;
const DOMAIN = Buffer.from('baton-seal-1');

/** Why a seal was refused: the rejection reasons a run counts. */
export type SealProblem = 'unauthenticated' | 'replay';

/** A fresh secret key for one launch. */
export function newJobKey(): Uint8Array {
  return new Uint8Array(randomBytes(JOB_KEY_BYTES));
}

/** A key as it travels in a stage process's stdin or sits in a key file (base64url). */
export function keyText(key: Uint8Array): string {
  return Buffer.from(key).toString('base64url');
}

/** A key read back from keyText's form; null when it is not one. */
export function parseKey(text: string): Uint8Array | null {
  const t = text.trim();
  if (!/^[A-Za-z0-9_-]{43}$/.test(t)) return null;
  const b = Buffer.from(t, 'base64url');
  return b.length === JOB_KEY_BYTES ? new Uint8Array(b) : null;
}

function lengthPrefixed(b: Uint8Array): Uint8Array[] {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(b.byteLength);
  return [len, b];
}

/** A message as one buffer, or as parts in order (the same bytes, so the same seal). */
export type MessageBytes = Uint8Array | readonly Uint8Array[];

function gmac(key: Uint8Array, nonce: Uint8Array, label: Uint8Array, subject: string, data: MessageBytes): Buffer {
  const g = createCipheriv('aes-256-gcm', key, nonce);
  g.setAAD(DOMAIN);
  for (const part of [...lengthPrefixed(label), ...lengthPrefixed(Buffer.from(subject))]) g.setAAD(part);
  for (const part of data instanceof Uint8Array ? [data] : data) g.setAAD(part);
  g.final();
  return g.getAuthTag();
}

/** One sender's sealing state: its id (a nonce prefix) and its count of messages. */
export class Sealer {
  private id = randomBytes(8);
  private count = 0;
  private readonly labelBytes: Buffer;

  constructor(
    private readonly key: Uint8Array,
    readonly label: string,
  ) {
    this.labelBytes = Buffer.from(label);
    if (key.byteLength !== JOB_KEY_BYTES)
      throw new RangeError(`a job key is ${JOB_KEY_BYTES} bytes, got ${key.byteLength}`);
    if (this.labelBytes.byteLength > MAX_LABEL_BYTES)
      throw new RangeError(`a seal's sender label is at most ${MAX_LABEL_BYTES} bytes, got ${JSON.stringify(label)}`);
  }

  seal(subject: string, data: MessageBytes): Uint8Array {
    if (this.count === 0xffffffff) {
      this.id = randomBytes(8);
      this.count = 0;
    }
    this.count++;
    const out = Buffer.alloc(HEAD_BYTES + this.labelBytes.byteLength);
    out[0] = SEAL_VERSION;
    this.id.copy(out, 1);
    out.writeUInt32BE(this.count, 9);
    gmac(this.key, out.subarray(1, 1 + NONCE_BYTES), this.labelBytes, subject, data).copy(out, 1 + NONCE_BYTES);
    this.labelBytes.copy(out, HEAD_BYTES);
    return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
  }
}

/** What an opened seal says: who sealed the message, and the sealer's id and count (for replay checks). */
export interface OpenedSeal {
  readonly label: string;
  readonly sealer: string;
  readonly count: number;
}

/** The seal's sender if `seal` is a valid seal of (subject, data) under `key`, else null. */
export function openSeal(
  key: Uint8Array,
  subject: string,
  data: Uint8Array,
  seal: Uint8Array | undefined,
): OpenedSeal | null {
  if (seal === undefined || seal.byteLength < HEAD_BYTES || seal.byteLength > HEAD_BYTES + MAX_LABEL_BYTES) return null;
  if (seal[0] !== SEAL_VERSION) return null;
  const b = Buffer.from(seal.buffer, seal.byteOffset, seal.byteLength);
  const nonce = b.subarray(1, 1 + NONCE_BYTES);
  const label = b.subarray(HEAD_BYTES);
  const want = gmac(key, nonce, label, subject, data);
  if (!timingSafeEqual(want, b.subarray(1 + NONCE_BYTES, HEAD_BYTES))) return null;
  return { label: label.toString('utf8'), sealer: b.subarray(1, 9).toString('hex'), count: b.readUInt32BE(9) };
}
