// Publishing a message given as parts (codec.ts encodeEnvelopeParts) through nats.js with one
// copy: nats.js's publish() takes one buffer, so a caller would first join the parts (a copy
// of every tensor) before nats.js joins them with the protocol line (a second copy). Here the
// parts go to the client's outbound buffer as its publish() puts a payload there, and it is
// written out at once, so the parts are copied once and may be reused when this returns.
// This uses nats.js internals (`protocol`: sendCommand, flushPending), as nats-socket.ts does;
// when they are not as expected, or the client is not connected, it declines and the caller
// joins the parts and publishes them the ordinary way.

import type { MsgHdrs, NatsConnection } from '@nats-io/transport-node';

interface ClientProtocol {
  connected: boolean;
  infoReceived: boolean;
  noMorePublishing: boolean;
  outBytes: number;
  outMsgs: number;
  outbound: { size(): number };
  sendCommand(cmd: string, ...payloads: Uint8Array[]): void;
  flushPending(): void;
}

const CRLF = new Uint8Array([13, 10]);

function protocolOf(nc: NatsConnection): ClientProtocol | null {
  const p = (nc as unknown as { protocol?: Partial<ClientProtocol> }).protocol;
  if (!p || typeof p.sendCommand !== 'function' || typeof p.flushPending !== 'function') return null;
  if (typeof p.outbound?.size !== 'function' || typeof p.outBytes !== 'number' || typeof p.outMsgs !== 'number')
    return null;
  if (p.connected !== true || p.infoReceived !== true || p.noMorePublishing === true || nc.isClosed()) return null;
  return p as ClientProtocol;
}

/**
 * Sends `parts` as one message on `subject` (with `headers`), written to the socket before it
 * returns; false (nothing sent) when it cannot, and the caller publishes them joined.
 */
export function sendParts(
  nc: NatsConnection,
  subject: string,
  parts: readonly Uint8Array[],
  headers: MsgHdrs | undefined,
): boolean {
  const p = protocolOf(nc);
  if (!p) return false;
  const hdr = headers ? (headers as unknown as { encode(): Uint8Array }).encode() : undefined;
  const len = parts.reduce((n, x) => n + x.byteLength, hdr?.byteLength ?? 0);
  const proto = hdr ? `HPUB ${subject} ${hdr.byteLength} ${len}\r\n` : `PUB ${subject} ${len}\r\n`;
  p.outBytes += len;
  p.outMsgs++;
  p.sendCommand(proto, ...(hdr ? [hdr] : []), ...parts, CRLF);
  // Written out now (nats.js would wait for a microtask): the caller may reuse the parts.
  p.flushPending();
  return true;
}
