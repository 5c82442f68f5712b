import { NatsBus } from '../transport/nats-bus';
import type { NatsBusOptions } from '../transport/nats-bus';
import { startNatsServer } from '../transport/nats-server';
import type { NatsServerHandle } from '../transport/nats-server';
import type { NatsServerOptions } from '../transport/nats-server-config';

export interface NatsBusSuite {
  /** The suite's running server (inside tests and hooks only). */
  server(): NatsServerHandle;
  /** A new NatsBus on the suite's server, closed after the suite. */
  bus(opts?: NatsBusOptions): Promise<NatsBus>;
}

/**
 * Starts a nats-server (with `opts`) before the enclosing mocha suite; after it, closes every
 * bus that `bus()` opened, then stops the server.
 */
export function natsBusSuite(opts: NatsServerOptions = {}): NatsBusSuite {
  let server: NatsServerHandle | undefined;
  const buses: NatsBus[] = [];
  before(async () => {
    server = await startNatsServer(opts);
  });
  after(async () => {
    await Promise.all(buses.map((b) => b.close()));
    await server?.stop();
  });
  const running = () => {
    if (!server) throw new Error('the suite nats-server is not running (used outside a test?)');
    return server;
  };
  return {
    server: running,
    bus: async (busOpts?: NatsBusOptions) => {
      const b = await NatsBus.connect(running().url, busOpts);
      buses.push(b);
      return b;
    },
  };
}
