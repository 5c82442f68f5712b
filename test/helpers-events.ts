import { ReceiveEvent, SendEvent, TaskEndEvent, TaskStartEvent } from '../stage/events';

/** The start, at time `t`, of the forward of microbatch 0 (chunk 0) on stage 0 in iteration 0: one task in flight, no backpressure. */
export function forwardStart(t: number): TaskStartEvent {
  return {
    type: 'task-start',
    t,
    stage: 0,
    iteration: 0,
    kind: 'F',
    mb: 0,
    chunk: 0,
    inflight: 1,
    backpressure: false,
  };
}

/** The end, at time `t`, of the task forwardStart starts. */
export function forwardEnd(t: number): TaskEndEvent {
  return { type: 'task-end', t, stage: 0, iteration: 0, kind: 'F', mb: 0, chunk: 0 };
}

/** Stage 0 sending microbatch 0's activation (chunk 0) to stage 1 at time `t`, as message `seq` of `bytes`. */
export function activationSend(t: number, seq: number, bytes: number): SendEvent {
  return { type: 'send', t, stage: 0, iteration: 0, kind: 'activation', mb: 0, chunk: 0, dst: 1, seq, bytes };
}

/** Stage 1 receiving microbatch 0's activation (chunk 0) from stage 0 at time `t`, as message `seq` of `bytes`, `latency` ms after its send. */
export function activationReceive(t: number, seq: number, bytes: number, latency: number): ReceiveEvent {
  return {
    type: 'receive',
    t,
    stage: 1,
    iteration: 0,
    kind: 'activation',
    mb: 0,
    chunk: 0,
    src: 0,
    seq,
    bytes,
    latency,
  };
}
