// The errors of a job's wiring and launch (re-exported by job/wire-stage.ts, where they were first).

import { BatonError, EXIT_INPUT } from '../base/errors';

export class JobError extends BatonError {
  override name = 'JobError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** A node agent refused the job's input (its config, policy, profile): bad input, as the same error would be here. */
export class NodeInputError extends JobError {
  override name = 'NodeInputError';
  override readonly exitStatus = EXIT_INPUT;
}

/** A job config that cannot run (its modes, sizes or policy do not go together): bad input. */
export class JobConfigError extends JobError {
  override name = 'JobConfigError';
  override readonly exitStatus = EXIT_INPUT;
}

/**
 * The NATS server refused a process of the job a publish or subscription its user may not
 * make: the message never arrives, so the job fails at once instead of waiting for it.
 */
export class PermissionDeniedError extends JobError {
  override name = 'PermissionDeniedError';
  constructor(
    /** Who was refused: `node <name> (stages …)`, or `the launcher`. */
    readonly who: string,
    readonly operation: 'publish' | 'subscription',
    readonly subject: string,
    detail: string,
  ) {
    super(
      `${who}: the NATS server refused a ${operation} on ${JSON.stringify(subject)}, which its user has no permission for (${detail}); the job cannot complete without it (users from baton auth init must be made for the job's --stages and --chunks, and each agent host the stages its user was made for)`,
    );
  }
}
