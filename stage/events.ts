// One stream of events feeds the trace file, the Gantt chart, the tap and the
// statistics. Times are milliseconds on the emitting stage's clock.

import { SHAPE_LIMITS, TaskKind } from '../policies/task';

interface Base {
  readonly t: number;
  readonly stage: number;
  readonly iteration: number;
  /** Tensor-parallel rank of the stage actor that emitted it (absent: 0). */
  readonly rank?: number;
  /** Data-parallel replica (absent: 0). */
  readonly replica?: number;
}

export interface TaskStartEvent extends Base {
  readonly type: 'task-start';
  readonly kind: TaskKind;
  readonly mb: number;
  readonly chunk: number;
  /** In-flight forwards at this stage when the task started. */
  readonly inflight: number;
  /** The arbiter was draining under backpressure when it picked this task. */
  readonly backpressure: boolean;
}

export interface TaskEndEvent extends Base {
  readonly type: 'task-end';
  readonly kind: TaskKind;
  readonly mb: number;
  readonly chunk: number;
  /** The training loss this task computed, when it is a loss stage's (asynchronous training's live progress). */
  readonly loss?: number;
}

export interface SendEvent extends Base {
  readonly type: 'send';
  readonly kind: string;
  readonly mb: number;
  readonly chunk: number;
  readonly dst: number;
  readonly seq: number;
  readonly bytes: number;
  /** CPU ms the sender spent encoding the message. */
  readonly cpuMs?: number;
}

export interface ReceiveEvent extends Base {
  readonly type: 'receive';
  readonly kind: string;
  readonly mb: number;
  readonly chunk: number;
  readonly src: number;
  readonly seq: number;
  readonly bytes: number;
  /** Receive time minus the sender's send time (same clock only in one process). */
  readonly latency: number;
  /** CPU ms the receiver spent decoding and validating the message. */
  readonly cpuMs?: number;
}

export interface WaitEvent extends Base {
  readonly type: 'wait';
  /** How long the stage sat idle with work left before this task could start. */
  readonly ms: number;
  /**
   * A tensor-parallel round open (proposal to answer) is two waits: tp-peer, until the group's
   * last peer proposal of the round reached this rank (a peer had not reached the round yet:
   * a readiness wait), then tp-coord, the all-gather's own message time and the decision.
   * tp-defer: after a round without agreement.
   */
  readonly reason: 'nothing-ready' | 'binding' | 'backpressure' | 'tp-defer' | 'tp-peer' | 'tp-coord';
}

/** The sender published a message again, asked by its receiver, which had waited for it too long (a lost message). */
export interface ResendEvent extends Omit<SendEvent, 'type' | 'cpuMs'> {
  readonly type: 'resend';
}

export interface RejectEvent extends Base {
  readonly type: 'reject';
  readonly reason: string;
  readonly detail: string;
}

export interface IterationEvent extends Base {
  readonly type: 'iteration-start' | 'iteration-end';
}

/** The stage adopted a policy swap (stage/policy-swap.ts): an instant in the trace. */
export interface PolicySwapEvent extends Base {
  readonly type: 'policy-swap';
  /** The swap's number (the job's policy actor numbers them). */
  readonly swap: number;
  readonly what: 'arbitration' | 'consistency';
  readonly from: string;
  readonly to: string;
  /** Tasks this stage had dispatched (arbitration) or updates it had made (consistency) when it adopted the swap. */
  readonly tasks: number;
}

export type BatonEvent =
  | TaskStartEvent
  | TaskEndEvent
  | SendEvent
  | ReceiveEvent
  | WaitEvent
  | RejectEvent
  | ResendEvent
  | IterationEvent
  | PolicySwapEvent;

export type EventSink = (e: BatonEvent) => void;

/**
 * Whether `e` is work done (a task or an iteration ended): what a stall watchdog counts as
 * progress. Messages are not: stages asking each other forever for a resend that never
 * arrives send and receive without end.
 */
export const endsWork = (e: BatonEvent): boolean => e.type === 'task-end' || e.type === 'iteration-end';

const TASK_KINDS = new Set(['F', 'B', 'W']);
const WAIT_REASONS = new Set(['nothing-ready', 'binding', 'backpressure', 'tp-defer', 'tp-peer', 'tp-coord']);
const isInt =
  (min: number, max = Number.MAX_SAFE_INTEGER) =>
  (x: unknown) =>
    Number.isSafeInteger(x) && (x as number) >= min && (x as number) <= max;
const isFinite = (x: unknown) => typeof x === 'number' && Number.isFinite(x);
/** Event times are ms on a monotonic or virtual clock; this bound (about 31 years) keeps
 * spans and sums of them finite for everything that reads events back. */
export const MAX_EVENT_TIME_MS = 1e12;
const isTime = (x: unknown) => isFinite(x) && Math.abs(x as number) <= MAX_EVENT_TIME_MS;
// A microbatch or chunk index beyond any shape Baton runs (policies/task.ts SHAPE_LIMITS).
const MAX_MB = SHAPE_LIMITS.perStage - 1;
const MAX_CHUNK = SHAPE_LIMITS.chunks - 1;
const MAX_STAGE = SHAPE_LIMITS.stages - 1;
const isString = (x: unknown) => typeof x === 'string';
const isBoolean = (x: unknown) => typeof x === 'boolean';
type FieldCheck = readonly [name: string, ok: (x: unknown) => boolean, expected: string, optional?: boolean];
const TASK_FIELDS: FieldCheck[] = [
  ['kind', (x) => TASK_KINDS.has(x as string), 'F, B or W'],
  ['mb', isInt(0, MAX_MB), `an integer from 0 to ${MAX_MB}`],
  ['chunk', isInt(0, MAX_CHUNK), `an integer from 0 to ${MAX_CHUNK}`],
];
const MESSAGE_FIELDS: FieldCheck[] = [
  ['kind', isString, 'a string'],
  ['mb', isInt(-1, MAX_MB), `an integer from -1 to ${MAX_MB}`],
  ['chunk', isInt(-1, MAX_CHUNK), `an integer from -1 to ${MAX_CHUNK}`],
  ['seq', isInt(0), 'an integer >= 0'],
  ['bytes', isInt(0), 'an integer >= 0'],
  ['cpuMs', isFinite, 'a finite number', true],
];
const EVENT_FIELDS: Record<BatonEvent['type'], FieldCheck[]> = {
  'task-start': [...TASK_FIELDS, ['inflight', isInt(0), 'an integer >= 0'], ['backpressure', isBoolean, 'a boolean']],
  'task-end': [...TASK_FIELDS, ['loss', isFinite, 'a finite number', true]],
  send: [...MESSAGE_FIELDS, ['dst', isInt(-1, MAX_STAGE), `an integer from -1 to ${MAX_STAGE}`]],
  receive: [
    ...MESSAGE_FIELDS,
    ['src', isInt(-1, MAX_STAGE), `an integer from -1 to ${MAX_STAGE}`],
    ['latency', isTime, `a number from -${MAX_EVENT_TIME_MS} to ${MAX_EVENT_TIME_MS}`],
  ],
  wait: [
    ['ms', (x) => isTime(x) && (x as number) >= 0, `a number from 0 to ${MAX_EVENT_TIME_MS}`],
    ['reason', (x) => WAIT_REASONS.has(x as string), [...WAIT_REASONS].join(', ')],
  ],
  resend: [...MESSAGE_FIELDS, ['dst', isInt(-1, MAX_STAGE), `an integer from -1 to ${MAX_STAGE}`]],
  reject: [
    ['reason', isString, 'a string'],
    ['detail', isString, 'a string'],
  ],
  'iteration-start': [],
  'iteration-end': [],
  'policy-swap': [
    ['swap', isInt(0), 'an integer >= 0'],
    ['what', (x) => x === 'arbitration' || x === 'consistency', 'arbitration or consistency'],
    ['from', (x) => isString(x) && (x as string).length <= 300, 'a string of at most 300 characters'],
    ['to', (x) => isString(x) && (x as string).length <= 300, 'a string of at most 300 characters'],
    ['tasks', isInt(0), 'an integer >= 0'],
  ],
};

/**
 * What is wrong with an event that came over the wire, or null when it has every field
 * its type needs, each of the right type (the statistics, the trace file and the
 * validation read them without further checks).
 */
export function eventProblem(x: unknown): string | null {
  if (typeof x !== 'object' || x === null || Array.isArray(x)) return 'an event must be a map';
  const e = x as Record<string, unknown>;
  // Only a string is looked up: a peer's list nested thousands deep would overflow the stack as a key.
  const fields =
    typeof e.type === 'string' && Object.prototype.hasOwnProperty.call(EVENT_FIELDS, e.type)
      ? EVENT_FIELDS[e.type as BatonEvent['type']]
      : null;
  if (!fields)
    return `unknown event type ${typeof e.type === 'string' ? JSON.stringify(e.type.slice(0, 40)) : typeof e.type}`;
  const checks: FieldCheck[] = [
    ['t', isTime, `a number from -${MAX_EVENT_TIME_MS} to ${MAX_EVENT_TIME_MS} (ms)`],
    ['stage', isInt(0, MAX_STAGE), `an integer from 0 to ${MAX_STAGE}`],
    ['iteration', isInt(-1), 'an integer >= -1'],
    ['rank', isInt(0, MAX_STAGE), `an integer from 0 to ${MAX_STAGE}`, true],
    ['replica', isInt(0, MAX_STAGE), `an integer from 0 to ${MAX_STAGE}`, true],
    ...fields,
  ];
  for (const [name, ok, expected, optional] of checks) {
    if (e[name] === undefined && optional) continue;
    if (!ok(e[name])) return `${e.type} event: field "${name}" must be ${expected}`;
  }
  return null;
}
