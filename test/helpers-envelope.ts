import { encodeEnvelope } from '../transport/codec';
import { ENVELOPE_VERSION } from '../transport/envelope';

/** An encoded stage report from stage `src`, as a stage (or a forger) would publish it. */
export function reportEnvelope(
  job: string,
  src: number,
  body: Record<string, unknown>,
  opts: { iteration?: number; launch?: string } = {},
): Uint8Array {
  return encodeEnvelope({
    v: ENVELOPE_VERSION,
    job,
    kind: 'report',
    iteration: opts.iteration ?? 0,
    mb: -1,
    chunk: -1,
    dir: 'control',
    src,
    dst: -1,
    seq: 0,
    sentAt: 0,
    bytes: 0,
    tensors: [],
    body,
    ...(opts.launch !== undefined ? { launch: opts.launch } : {}),
  });
}
