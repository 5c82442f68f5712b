// What a local nats-server is asked to be (nats-server.ts starts it): the options with
// their defaults, and the config file they become: loopback only, max_payload raised for
// tensor messages, max_pending above it, a write deadline long enough for a process busy
// in a compute task (WRITE_DEADLINE_S), optional users with their permissions and an
// optional cluster block with routes so several servers form one cluster.
//
// Users go inside an `accounts` block, never a top-level `authorization` one: with users
// there and only $SYS in accounts, nats-server 2.9.10 (Debian's) lets a client in without
// credentials (GHSA-fr2g-9hjm-wr23, fixed in 2.9.23). A token has no place in accounts, so
// `auth: { token }` alone still renders an authorization block (a token and no users).
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
  /** Users (in one account) with their publish and subscribe permissions; clients without credentials are refused. Not with auth. */
  users?: readonly NatsUser[];
}

/** One user of a server: its credentials and the subjects it may publish and subscribe to. */
export interface NatsUser {
  readonly user: string;
  readonly password: string;
  /** Subjects (wildcards allowed) it may publish on; omitted: any; empty: none. */
  readonly publish?: readonly string[];
  /** Subjects it may subscribe to; omitted: any. */
  readonly subscribe?: readonly string[];
}

/** The name of the one account Baton's users are in. */
export const BATON_ACCOUNT = 'BATON';

const list = (xs: readonly string[]) => `[${xs.map((x) => JSON.stringify(x)).join(', ')}]`;

/** An `accounts` block holding `users`, with their permissions (and replies to requests they get allowed). */
export function accountsBlock(users: readonly NatsUser[], indent = ''): string[] {
  const lines = [`${indent}accounts {`, `${indent}  ${BATON_ACCOUNT}: {`, `${indent}    users: [`];
  for (const u of users) {
    const perms: string[] = [];
    // An empty allow list would be read as no restriction: nothing at all is a deny of everything.
    if (u.publish)
      perms.push(u.publish.length > 0 ? `publish: { allow: ${list(u.publish)} }` : 'publish: { deny: [">"] }');
    if (u.subscribe) perms.push(`subscribe: { allow: ${list(u.subscribe)} }`);
    if (u.publish || u.subscribe) perms.push('allow_responses: true');
    const permissions = perms.length > 0 ? `, permissions: { ${perms.join(', ')} }` : '';
    lines.push(
      `${indent}      { user: ${JSON.stringify(u.user)}, password: ${JSON.stringify(u.password)}${permissions} }`,
    );
  }
  lines.push(`${indent}    ]`, `${indent}  }`, `${indent}}`);
  return lines;
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
  users?: readonly NatsUser[];
  stock?: boolean;
  tls?: NatsServerTls;
}): string {
  if (o.auth && o.users) throw new RangeError('renderConfig: give auth or users, not both');
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
  if (o.auth && 'token' in o.auth) lines.push('authorization {', `  token: ${JSON.stringify(o.auth.token)}`, '}');
  else if (o.auth) lines.push(...accountsBlock([o.auth]));
  if (o.users) lines.push(...accountsBlock(o.users));
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
