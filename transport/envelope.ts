// The envelope every Baton message travels in. Plain data; transport/codec.ts turns
// it into CBOR bytes and back (validating everything it decodes).

import { randomBytes } from 'crypto';

export const ENVELOPE_VERSION = 1;

export type Direction = 'forward' | 'backward' | 'control';

export type DType = 'float32' | 'float64' | 'int32' | 'int16' | 'int8' | 'uint32' | 'uint16' | 'uint8';

export type AnyTypedArray =
  Float32Array | Float64Array | Int32Array | Int16Array | Int8Array | Uint32Array | Uint16Array | Uint8Array;

export interface TensorPayload {
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly data: AnyTypedArray;
}

/** What a message is for; the subject kind of transport/subjects.ts plus control verbs. */
export type MessageKind = string;

export interface Envelope {
  readonly v: number;
  readonly job: string;
  readonly kind: MessageKind;
  readonly iteration: number;
  readonly mb: number;
  readonly chunk: number;
  readonly dir: Direction;
  /** Sending stage (or -1 for the coordinator / a tool). */
  readonly src: number;
  /** Destination stage (or -1 for the coordinator / a tool). */
  readonly dst: number;
  /** Per-sender sequence number, increasing by one per message. */
  readonly seq: number;
  /** Send time in ms on the sender's clock (wall clock: ms since the epoch). */
  readonly sentAt: number;
  /**
   * Emulated communication time (latency, bandwidth and jitter) the sender drew for
   * this message; the receiving mailbox delivers it this long after `sentAt`
   * (receiver.ts, commHoldMs). Absent = 0.
   */
  readonly commMs?: number;
  /** Emulated payload size in bytes when the message carries no real tensors. */
  readonly bytes: number;
  readonly tensors: readonly TensorPayload[];
  /** Kind-specific fields of control messages. */
  readonly body?: Readonly<Record<string, unknown>>;
  /**
   * The launch of the job this message belongs to: an id its launcher draws for each run
   * over NATS. Its stages and coordinator refuse messages of another launch (a stage
   * process a stopped launcher left behind, still finishing a task). Absent on the
   * in-process bus, where nothing is checked.
   */
  readonly launch?: string;
}

/** What a launch id looks like (newLaunchId draws 12 hex digits), and how errors say it. */
export const LAUNCH_RE = /^[0-9A-Za-z_-]{1,64}$/;
export const LAUNCH_EXPECTED = 'a string of 1 to 64 of [0-9A-Za-z_-]';

/** A fresh launch id for a run over NATS. */
export function newLaunchId(): string {
  return randomBytes(6).toString('hex');
}

/** The `launch` field of a message or reply: present only when there is a launch id. */
export function launchField(launch: string | undefined): { launch?: string } {
  return launch !== undefined ? { launch } : {};
}

/** A validated message's launch as a refusal names it. */
export function launchText(launch: string | undefined): string {
  return launch === undefined ? '(none)' : launch;
}

/** Longest job name: it is in every subject and every envelope. */
export const MAX_JOB_NAME = 128;
