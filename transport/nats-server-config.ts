// What a local nats-server is asked to be (nats-server.ts starts it): the options with
// their defaults, and the config file they become: loopback only, max_payload raised for
// tensor messages, max_pending above it, a write deadline long enough for a process busy
// in a compute task (WRITE_DEADLINE_S), optional authorization and an optional cluster
// block with routes so several servers form one cluster.
//
// With `tls`, clients must connect over TLS (files the caller made; tests make a CA).
// Not modelled: TLS on routes, JetStream, leaf nodes, gateways, non-loopback client addresses.

export interface NatsServerOptions {
  /** Client port on 127.0.0.1; default a free port. */
  port?: number;
  /** Largest message the server accepts, bytes; default 64 MiB. */
  maxPayload?: number;
  /** Per-client outbound buffer on the server, bytes; default 4 × maxPayload (must exceed it). */
  maxPending?: number;
  /** Route URLs of other cluster members (`nats-route://127.0.0.1:P`); implies a cluster block. */
  routes?: string[];
  /** Cluster (route) port; default a free port when routes are given or `cluster` is true. */
  clusterPort?: number;
  /** Address the cluster listener binds: default 127.0.0.1; another machine's servers need an address they reach (a network namespace's own, in tests). */
  clusterHost?: string;
  /** Open a cluster listener even without routes (the first member of a cluster). Default false. */
  cluster?: boolean;
  /** Cluster name; default 'baton'. All members must share it. */
  clusterName?: string;
  /** Server name (shows up in logs and server info); default 'baton-<port>'. */
  name?: string;
  /** Also serve the HTTP monitoring endpoints (needed by waitForRoutes); default false. */
  monitor?: boolean;
  /** Path of the binary; default `nats-server` found on PATH or in /usr/sbin. */
  binary?: string;
  /** How long to wait for the server to accept connections, ms; default 10000. */
  startTimeoutMs?: number;
  /** nats-server's own defaults (max_payload 1 MB, max_pending 64 MB, its write deadline): the config has only listen, name and monitor. Default false. */
  stock?: boolean;
  /** Require clients to log in with a user and password, or a token; default none. */
  auth?: { user: string; password: string } | { token: string };
  /** Require TLS of clients: PEM files of the server's certificate and key, and with `ca`, verify client certificates against it. */
  tls?: NatsServerTls;
}

export interface NatsServerTls {
  cert: string;
  key: string;
  /** CA file client certificates must chain to; with it, clients must present one. */
  ca?: string;
}

export const DEFAULT_MAX_PAYLOAD = 64 * 1024 * 1024;

/**
 * How long the server waits on a client that does not read before it cuts it off as a slow
 * consumer (nats-server's default is 10 s). A stage process does not read while a compute
 * task holds its thread, and a cut connection loses the microbatches sent to it, so the
 * server waits for it as long as its pings do (every 2 minutes, 2 unanswered) and keeps up
 * to max_pending bytes for it meanwhile.
 */
export const WRITE_DEADLINE_S = 300;

export function renderConfig(o: {
  port: number;
  name: string;
  maxPayload: number;
  maxPending: number;
  monitorPort?: number;
  cluster?: { port: number; name: string; routes: string[]; host?: string };
  auth?: NatsServerOptions['auth'];
  stock?: boolean;
  tls?: NatsServerTls;
}): string {
  if (o.stock)
    return [
      `server_name: "${o.name}"`,
      `listen: "127.0.0.1:${o.port}"`,
      ...(o.monitorPort !== undefined ? [`http: "127.0.0.1:${o.monitorPort}"`] : []),
      '',
    ].join('\n');
  const lines = [
    `server_name: "${o.name}"`,
    `listen: "127.0.0.1:${o.port}"`,
    `max_payload: ${o.maxPayload}`,
    `max_pending: ${o.maxPending}`,
    `write_deadline: "${WRITE_DEADLINE_S}s"`,
  ];
  if (o.monitorPort !== undefined) lines.push(`http: "127.0.0.1:${o.monitorPort}"`);
  if (o.auth)
    lines.push(
      'authorization {',
      ...('token' in o.auth
        ? [`  token: ${JSON.stringify(o.auth.token)}`]
        : [`  user: ${JSON.stringify(o.auth.user)}`, `  password: ${JSON.stringify(o.auth.password)}`]),
      '}',
    );
  if (o.tls) lines.push(...tlsBlock(o.tls));
  if (o.cluster) {
    lines.push(
      'cluster {',
      `  name: "${o.cluster.name}"`,
      `  listen: "${o.cluster.host ?? '127.0.0.1'}:${o.cluster.port}"`,
      '  no_advertise: true',
    );
    if (o.cluster.routes.length > 0) lines.push(`  routes: [${o.cluster.routes.map((r) => `"${r}"`).join(', ')}]`);
    lines.push('}');
  }
  return lines.join('\n') + '\n';
}

function tlsBlock(t: NatsServerTls): string[] {
  return [
    'tls {',
    `  cert_file: ${JSON.stringify(t.cert)}`,
    `  key_file: ${JSON.stringify(t.key)}`,
    ...(t.ca !== undefined ? [`  ca_file: ${JSON.stringify(t.ca)}`, '  verify: true'] : []),
    '}',
  ];
}
