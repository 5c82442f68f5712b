import { readFileSync } from 'fs';
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

/** Resolve once `pred()` holds, polling; reject after `ms` with `what`. */
export async function until(pred: () => boolean, what: string, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** True while `pid` runs; a zombie (killed, not yet reaped by its new parent) counts as dead. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}
