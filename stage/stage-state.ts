// The stage's state and the messages and effects of its transition (stage-logic.ts),
// with the snapshot a status query or a deadlock error shows. Types and bookkeeping
// only: nothing here decides what runs next.

import { Arbiter } from '../policies/arbiter';
import { PipelineShape, Task, formatTask, isLossStage, task, taskIndex } from '../policies/task';
import { TensorPayload } from '../transport/envelope';
import { BatonEvent, ReceiveEvent } from './events';
import { ReadySet } from './ready-set';
import { TpSetup, TpState, initialTpState } from './tp-coordination';
import type { PolicyInForce, SwapOrder } from './policy-swap';
import { policyInForce } from './policy-swap';

export interface StageSetup {
  readonly stage: number;
  readonly shape: PipelineShape;
  /** The stage's first policy with its buffer limit (policies/arbiter.ts); swaps replace it (policy-swap.ts). */
  readonly arbiter: Arbiter;
  /** The job's first iteration: its first start must be for it (default: any). */
  readonly firstIteration?: number;
  /**
   * Arbitrate only when asked ('arbitrate'), after a change asks for it ('arbitrate-later'):
   * on the virtual clock the actor asks once everything due at this instant has been
   * delivered, so a task's end and an input arriving at the same instant are seen
   * together, as the hint order would rank them, not in the order the actors' messages
   * happened to take (default: arbitrate at once).
   */
  readonly settleBeforeArbitration?: boolean;
  /** The stage's tensor-parallel group and this rank in it (absent: one rank, no coordination). */
  readonly tp?: TpSetup;
}

export type StageMsg =
  | { readonly type: 'start'; readonly iteration: number }
  | {
      /** An activation ('input') or a gradient ('grad') for task (mb, chunk) arrived. */
      readonly type: 'input' | 'grad';
      readonly iteration: number;
      readonly mb: number;
      readonly chunk: number;
      readonly tensors?: readonly TensorPayload[];
      readonly receipt?: ReceiveEvent;
    }
  | {
      readonly type: 'done';
      readonly iteration: number;
      readonly task: Task;
      readonly tensors?: readonly TensorPayload[];
      /** The training loss the task computed (a loss stage's), for its task-end event. */
      readonly loss?: number;
    }
  /** Arbitrate now (with settleBeforeArbitration, after an 'arbitrate-later'). */
  | { readonly type: 'arbitrate' }
  /**
   * The group's answer to a round: every rank's candidate, in rank order (stage/tp-coordination.ts),
   * and `peersIn`, when the round's last peer proposal reached this rank's group member (its
   * bytes, before their emulated message time; this rank's own clock).
   */
  | {
      readonly type: 'tp-result';
      readonly round: number;
      readonly candidates: readonly Task[];
      readonly peersIn: number;
    }
  /** A peer of the group proposed in `round`. */
  | { readonly type: 'tp-peer'; readonly round: number }
  /** Swap the arbitration policy at its safe point (policy-swap.ts). */
  | { readonly type: 'swap'; readonly order: SwapOrder };

export type StageEffect =
  | { readonly type: 'run'; readonly iteration: number; readonly task: Task }
  | {
      readonly type: 'send';
      readonly iteration: number;
      readonly task: Task;
      readonly kind: 'activation' | 'gradient';
      readonly dst: number;
      readonly dstChunk: number;
    }
  | {
      readonly type: 'local';
      readonly iteration: number;
      readonly task: Task;
      readonly kind: 'input' | 'grad';
      readonly dstChunk: number;
    }
  | { readonly type: 'finished'; readonly iteration: number; readonly peakInflight: number }
  /** Propose `task` to the tensor-parallel group in `round` (before an F or B when T > 1). */
  | { readonly type: 'propose'; readonly round: number; readonly iteration: number; readonly task: Task }
  /** Send 'arbitrate' once what is due at this instant has arrived (settleBeforeArbitration). */
  | { readonly type: 'arbitrate-later' }
  | { readonly type: 'event'; readonly event: BatonEvent };

/** A peer's message the stage cannot take (rejected; the stage carries on). */
export class StageProtocolError extends Error {
  override name = 'StageProtocolError';
}

/** The policy broke its contract (picked a task that is not ready): the job fails, naming it. */
export class PolicyError extends Error {
  override name = 'PolicyError';
}

export interface IterationState {
  readonly iteration: number;
  readonly inputs: Uint8Array; // [chunk][mb] forward input arrived
  readonly grads: Uint8Array; // [chunk][mb] gradient arrived
  readonly done: Uint8Array; // taskIndex -> ran
  readonly ready: ReadySet;
  remaining: number;
  readonly ranOfMb: Uint32Array; // [mb] tasks that ran, of tasksPerMb
  readonly tasksPerMb: number; // V * kinds
  firstUnfinished: number; // lowest mb with a task not yet run
  memo: unknown;
  idleSince: number | null;
  idleReason: 'nothing-ready' | 'binding' | 'backpressure' | 'tp-defer';
}

export interface StageState {
  readonly setup: StageSetup;
  current: IterationState | null;
  running: { iteration: number; task: Task } | null;
  inflight: number;
  peakInflight: number;
  /** Arrivals for iterations this stage has not started yet (possible over NATS). */
  early: StageMsg[];
  finished: number[];
  /** An 'arbitrate-later' is out and its 'arbitrate' has not come. */
  arbitrationAsked: boolean;
  /** Tensor-parallel coordination (null with one rank). */
  readonly tp: TpState | null;
  /** The arbiter in force (setup.arbiter until a swap) and the swaps waiting (policy-swap.ts). */
  readonly policy: PolicyInForce;
}

export function initialStageState(setup: StageSetup): StageState {
  return {
    setup,
    current: null,
    running: null,
    inflight: 0,
    peakInflight: 0,
    early: [],
    finished: [],
    arbitrationAsked: false,
    tp: setup.tp && setup.tp.ranks > 1 ? initialTpState() : null,
    policy: policyInForce(setup.arbiter),
  };
}

/** A snapshot for diagnostics (deadlock errors, status queries). */
export interface StageStatus {
  stage: number;
  iteration: number | null;
  running: string | null;
  remaining: number;
  inflight: number;
  forwardReady: string[];
  backwardReady: string[];
  weightReady: string[];
  waitingFor: string[];
  idleSince: number | null;
  /** Inputs and gradients held for an iteration this stage has not started (its start has not come). */
  held: number;
  /** The iteration those held arrivals belong to, null when none is held. */
  heldIteration: number | null;
  /** In a wide job: which rank and replica (`rank 1, replica 0`), and the open TP round if any. */
  lane?: string;
  /** The arbitration policy in force, and the swaps waiting for their safe point. */
  policy?: string;
  swapsPending?: number;
}

export function stageStatus(s: StageState): StageStatus {
  const it = s.current;
  const shape = s.setup.shape;
  const waitingFor: string[] = [];
  if (it) {
    for (let c = 0; c < shape.chunks; c++)
      for (let j = 0; j < shape.microbatches; j++) {
        const f = task('F', j, c);
        const b = task('B', j, c);
        if (!it.done[taskIndex(f, shape)] && !it.inputs[c * shape.microbatches + j])
          waitingFor.push(`${formatTask(f)} (input)`);
        else if (
          it.done[taskIndex(f, shape)] &&
          !it.done[taskIndex(b, shape)] &&
          !it.grads[c * shape.microbatches + j] &&
          !isLossStage(s.setup.stage, c, shape)
        )
          waitingFor.push(`${formatTask(b)} (gradient)`);
      }
  }
  if (s.tp?.proposing)
    waitingFor.unshift(`its TP group's agreement on ${formatTask(s.tp.proposing.task)} (round ${s.tp.round})`);
  return {
    stage: s.setup.stage,
    iteration: it ? it.iteration : null,
    running: s.running ? formatTask(s.running.task) : null,
    remaining: it ? it.remaining : 0,
    inflight: s.inflight,
    forwardReady: it ? it.ready.F.map(formatTask) : [],
    backwardReady: it ? it.ready.B.map(formatTask) : [],
    weightReady: it ? it.ready.W.map(formatTask) : [],
    waitingFor,
    idleSince: it ? it.idleSince : null,
    held: s.early.length,
    heldIteration: s.early.length > 0 ? (s.early[0] as { iteration: number }).iteration : null,
    policy: s.policy.arbiter.name,
    swapsPending: s.policy.pending.length,
  };
}
