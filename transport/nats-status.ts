// The status stream of a nats.js connection, reduced to what NatsBus acts on: the
// connection dropped, came back, or the server reported an error. Not modelled: the
// other status events (pings, server list updates, lame duck mode).

import type { NatsConnection } from '@nats-io/transport-node';

export interface StatusHooks {
  disconnect(): void;
  reconnect(): void;
  error(err: unknown): void;
}

/** Calls `on` for each drop, recovery and server error until the connection closes for good. */
export async function watchStatus(connection: NatsConnection, on: StatusHooks): Promise<void> {
  try {
    for await (const s of connection.status()) {
      if (s.type === 'disconnect') on.disconnect();
      else if (s.type === 'reconnect') on.reconnect();
      else if (s.type === 'error') on.error(s.error);
    }
  } catch {
    // The status iterator ends with the connection; nothing to report.
  }
}
