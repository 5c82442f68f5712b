// One stream of events feeds the trace file, the Gantt chart, the tap and the
// statistics. Times are milliseconds on the emitting stage's clock.

import { TaskKind } from '../policies/task';

interface Base {
  readonly t: number;
  readonly stage: number;
  readonly iteration: number;
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
  readonly reason: 'nothing-ready' | 'binding' | 'backpressure' | 'tp-defer';
}

export interface RejectEvent extends Base {
  readonly type: 'reject';
  readonly reason: string;
  readonly detail: string;
}

export interface IterationEvent extends Base {
  readonly type: 'iteration-start' | 'iteration-end';
}

export type BatonEvent = TaskStartEvent | TaskEndEvent | SendEvent | ReceiveEvent | WaitEvent | RejectEvent | IterationEvent;

export type EventSink = (e: BatonEvent) => void;
