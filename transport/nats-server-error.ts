// The one error of starting and watching a local nats-server (nats-server.ts), with the
// step that failed as its reason.

import { ReasonedError } from '../base/errors';

export type NatsServerErrorCode = 'missing-binary' | 'start-timeout' | 'exited' | 'routes-timeout' | 'no-monitor';

/** `reason` says which step failed. */
export class NatsServerError extends ReasonedError<NatsServerErrorCode> {
  override name = 'NatsServerError';
}
