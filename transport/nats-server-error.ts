// The one error of starting and watching a local nats-server (nats-server.ts), with a code
// saying which step failed.

export type NatsServerErrorCode = 'missing-binary' | 'start-timeout' | 'exited' | 'routes-timeout' | 'no-monitor';

export class NatsServerError extends Error {
  override name = 'NatsServerError';
  constructor(
    readonly code: NatsServerErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
