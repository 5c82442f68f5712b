// The codec's one error class: every failure to encode or decode a message, with the
// reason a receiver counts it under.

import { ReasonedError } from '../base/errors';

export type CodecErrorReason =
  'malformed' | 'truncated' | 'version' | 'missing-field' | 'bad-field' | 'dtype' | 'shape' | 'oversize';

export class CodecError extends ReasonedError<CodecErrorReason> {
  override name = 'CodecError';
}
