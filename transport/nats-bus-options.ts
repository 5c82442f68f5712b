// What a caller may set when it connects a NatsBus (nats-bus.ts).

import type { AccessNames, NatsAccess } from './nats-access';

export interface NatsBusOptions {
  /** Connection name shown by the server; default 'baton'. */
  name?: string;
  /** Called with every handler exception and transport error, after it is counted. Default: none. */
  onError?: (err: unknown, subject: string) => void;
  /** Connect timeout, ms; default 5000. */
  timeoutMs?: number;
  /** Reconnect after losing the server (every 250 ms for a minute: nats-connect.ts RECONNECT); default true. */
  reconnect?: boolean;
  /**
   * Called each time the client has reconnected after a drop. What was in flight then is
   * lost, and so is what was published while it was down (nats.js clears its buffer when it
   * dials again): this is when telling peers about the loss can work. Default: none.
   */
  onReconnect?: () => void;
  /** Called each time the connection drops (what is in flight is lost), with why. Default: none. */
  onDisconnect?: (why: Error) => void;
  /** TLS and credentials files (nats-access.ts); default none. */
  access?: NatsAccess;
  /** How errors name those files (the flags or environment variables they came from). */
  accessNames?: AccessNames;
}
