// How an error ends a command: each error class declares its exit status, 2 for bad flags
// or input (the user can fix the command), 1 for a job that failed. A node agent's refusal
// carries the status of its error back to the launcher (job/run-distributed.ts).

export const EXIT_FAILED = 1;
export const EXIT_INPUT = 2;
export type ExitStatus = typeof EXIT_FAILED | typeof EXIT_INPUT;

export class BatonError extends Error {
  readonly exitStatus: ExitStatus = EXIT_FAILED;
}

/** Bad flags or input: the command as given cannot run. */
export class InputError extends BatonError {
  override readonly exitStatus: ExitStatus = EXIT_INPUT;
}

/** An error whose cause a caller counts or branches on: `reason` names which of a fixed set it is. */
export class ReasonedError<R extends string> extends Error {
  constructor(
    readonly reason: R,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The exit status for `e`: its class's, and 1 for anything that is not a Baton error. */
export function exitStatusOf(e: unknown): ExitStatus {
  return e instanceof BatonError ? e.exitStatus : EXIT_FAILED;
}
