// Picking the loopback ports a local nats-server listens on (client, cluster, monitoring):
// ports that were free a moment ago, bound together so no two are the same. Nothing holds
// them afterwards, so another process can still take one before the server binds it.

import { createServer } from 'net';
import { NatsServerOptions } from './nats-server-config';

/** A port on 127.0.0.1 that was free a moment ago (bind port 0, read it, close). */
export async function freePort(): Promise<number> {
  return (await freePorts(1))[0];
}

/**
 * `count` different ports on 127.0.0.1 that were free a moment ago: bound together, then
 * closed. (Bound and closed one after the other, the kernel hands out the same port twice
 * now and then.)
 */
export async function freePorts(count: number): Promise<number[]> {
  const servers = Array.from({ length: count }, () => createServer());
  // Every listen settles before any socket is closed: one that failed must not leave the
  // others listening (and the process alive) after this has returned.
  const bound = await Promise.allSettled(
    servers.map(
      (srv) =>
        new Promise<number>((resolve, reject) => {
          srv.once('error', reject);
          srv.listen(0, '127.0.0.1', () => {
            const addr = srv.address();
            resolve(typeof addr === 'object' && addr ? addr.port : 0);
          });
        }),
    ),
  );
  await Promise.all(
    servers.map((srv) => new Promise<void>((resolve) => (srv.listening ? srv.close(() => resolve()) : resolve()))),
  );
  const failed = bound.find((b): b is PromiseRejectedResult => b.status === 'rejected');
  if (failed) throw failed.reason;
  return bound.map((b) => (b as PromiseFulfilledResult<number>).value);
}

/** The client, cluster and monitoring ports a server of these options listens on; the ones it picks all differ. */
export async function serverPorts(
  opts: Pick<NatsServerOptions, 'port' | 'routes' | 'cluster' | 'clusterPort' | 'monitor'>,
): Promise<{ port: number; clusterPort?: number; monitorPort?: number }> {
  const clustered = (opts.routes ?? []).length > 0 || opts.cluster === true || opts.clusterPort !== undefined;
  const wanted = [opts.port === undefined, clustered && opts.clusterPort === undefined, opts.monitor === true];
  const fresh = await freePorts(wanted.filter(Boolean).length);
  const next = (): number => fresh.shift() as number;
  const port = opts.port ?? next();
  const clusterPort = clustered ? (opts.clusterPort ?? next()) : undefined;
  const monitorPort = opts.monitor ? next() : undefined;
  return { port, clusterPort, monitorPort };
}
