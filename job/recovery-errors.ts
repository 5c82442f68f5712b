// The failures a recoverable job (job/recovery.ts) survives by replaying the iteration, and
// the one it ends with when they come too often.

import { JobError } from './wire-stage';

/**
 * The iteration under way cannot complete and must be replayed from its start: a stage's
 * process was lost (`node`: the launcher restarts it first), or messages were (no node).
 */
export class IterationLostError extends JobError {
  override name = 'IterationLostError';
  constructor(
    message: string,
    /** The node whose process was lost, or null when none was (lost messages). */
    readonly node: string | null,
    /** When the launcher knew (Date.now()). */
    readonly detectedAt: number = Date.now(),
  ) {
    super(message);
  }
}

/** More failures than --max-restarts allows: every one of them is named. */
export class RestartsExhaustedError extends JobError {
  override name = 'RestartsExhaustedError';
}
