// The codec's one error class: every failure to encode or decode a message, with the
// reason a receiver counts it under.

export type CodecErrorReason =
  'malformed' | 'truncated' | 'version' | 'missing-field' | 'bad-field' | 'dtype' | 'shape' | 'oversize';

export class CodecError extends Error {
  override name = 'CodecError';
  constructor(
    readonly reason: CodecErrorReason,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
