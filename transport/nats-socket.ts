// nats.js's socket under a connection, which its typed API does not expose: NatsBus.written()
// queues an empty write with a callback behind what is published, to learn when the kernel
// has it all. When the internals are not as expected, callers fall back to a flush().

import type { NatsConnection } from '@nats-io/transport-node';

export interface ClientSocket {
  writableLength: number;
  write(data: Uint8Array, cb: () => void): boolean;
}

/** nats.js's socket for `connection`, when its internals are as expected and it is open; else null. */
export function clientSocket(connection: NatsConnection): ClientSocket | null {
  const s = (connection as unknown as { protocol?: { transport?: { socket?: unknown } } }).protocol?.transport
    ?.socket as { writableLength?: unknown; write?: unknown; destroyed?: unknown } | undefined;
  if (!s || typeof s.writableLength !== 'number' || typeof s.write !== 'function' || s.destroyed === true) return null;
  return s as ClientSocket;
}

/** Resolves once `socket` has handed everything written to it so far to the kernel (or failed to). */
export async function socketDrained(socket: ClientSocket): Promise<void> {
  if (socket.writableLength === 0) return;
  await new Promise<void>((resolve) => {
    try {
      socket.write(new Uint8Array(0), () => resolve());
    } catch {
      resolve();
    }
  });
}
