// The NATS headers a message's seal (auth-seal.ts) travels in, beside the payload, so sealing
// copies no payload bytes. The headers are padded to a multiple of 8 bytes: the payload
// follows them in the received buffer, and an aligned payload decodes into tensors without a copy.
// Not modelled: any other header.

import { headers } from '@nats-io/transport-node';
import type { MsgHdrs } from '@nats-io/transport-node';

/** The NATS header a message's seal travels in, base64url. */
export const SEAL_HEADER = 'Baton-Seal';

/** Bytes `h` takes on the wire: max_payload counts them too. */
export function headerBytes(h: MsgHdrs): number {
  return (h as unknown as { encode(): Uint8Array }).encode().byteLength;
}

/** The headers that carry `seal`, padded to a multiple of 8 bytes. */
export function sealHeader(seal: Uint8Array): MsgHdrs {
  const h = headers();
  h.set(SEAL_HEADER, Buffer.from(seal.buffer, seal.byteOffset, seal.byteLength).toString('base64url'));
  h.set('Baton-Pad', 'x');
  const over = headerBytes(h) % 8;
  if (over !== 0) h.set('Baton-Pad', 'x'.repeat(1 + 8 - over));
  return h;
}

/** The seal a received message carries, or undefined when it has none. */
export function readSeal(h: MsgHdrs | undefined): Uint8Array | undefined {
  const seal = h?.get(SEAL_HEADER);
  return seal ? Buffer.from(seal, 'base64url') : undefined;
}
