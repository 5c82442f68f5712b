// The errors NatsBus (nats-bus.ts) throws; callers import them from there.

export class PayloadTooLargeError extends Error {
  override name = 'PayloadTooLargeError';
  constructor(
    readonly subject: string,
    readonly size: number,
    readonly limit: number,
  ) {
    super(`publish to ${JSON.stringify(subject)}: message is ${size} bytes, over the limit of ${limit} bytes`);
  }
}

export class NatsBusError extends Error {
  override name = 'NatsBusError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** What a caught value says, for a message that wraps it. */
export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
