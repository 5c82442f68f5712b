import { NatsServerHandle, startNatsServer } from '../transport/nats-server';

/**
 * Starts a nats-server before the enclosing mocha suite and stops it after; returns the
 * running server (call it inside tests and hooks, not while the suite is being defined).
 */
export function natsServerForSuite(): () => NatsServerHandle {
  let server: NatsServerHandle | undefined;
  before(async () => {
    server = await startNatsServer();
  });
  after(async () => {
    await server?.stop();
  });
  return () => {
    if (!server) throw new Error('the suite nats-server is not running (used outside a test?)');
    return server;
  };
}
