// Starting and stopping a local nats-server (the Debian package `nats-server`, 2.9)
// for the CLI, tests and benches: a generated config (loopback only,
// max_payload raised for tensor messages, max_pending above it, a write deadline long
// enough for a process busy in a compute task (WRITE_DEADLINE_S), optional cluster
// block with routes so several servers form one cluster), readiness by TCP connect
// plus the server's own "ready" log line, and a cleanup on exit, SIGINT and SIGTERM
// (process-cleanup.ts) so no server outlives its parent. The child is unref'd: a
// forgotten server does not keep the parent alive, and the cleanup kills it. The config
// and the log are files in a temp dir that is removed as soon as the server is spawned
// (it reads the config through a descriptor it inherits, /dev/fd/3), and the server
// gets a parent-death signal where it can, so not even SIGKILL of the parent, during
// the server's start or after it, leaves a server or a file behind.
//
// Not modelled: TLS, auth, JetStream, leaf nodes, gateways, non-loopback addresses.

import { ChildProcess, spawn, spawnSync } from 'child_process';
import {
  accessSync,
  constants,
  mkdtempSync,
  openSync,
  closeSync,
  fstatSync,
  readSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'fs';
import { createConnection, createServer } from 'net';
import { tmpdir } from 'os';
import { delimiter, join } from 'path';
import { onProcessEnd } from './process-cleanup';

export type NatsServerErrorCode = 'missing-binary' | 'start-timeout' | 'exited' | 'routes-timeout' | 'no-monitor';

export class NatsServerError extends Error {
  override name = 'NatsServerError';
  constructor(
    readonly code: NatsServerErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export interface NatsServerOptions {
  /** Client port on 127.0.0.1; default a free port. */
  port?: number;
  /** Largest message the server accepts, bytes; default 64 MiB. */
  maxPayload?: number;
  /** Per-client outbound buffer on the server, bytes; default 4 × maxPayload (must exceed it). */
  maxPending?: number;
  /** Route URLs of other cluster members (`nats-route://127.0.0.1:P`); implies a cluster block. */
  routes?: string[];
  /** Cluster (route) port on 127.0.0.1; default a free port when routes are given or `cluster` is true. */
  clusterPort?: number;
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
  /** Require clients to log in with a user and password, or a token; default none. */
  auth?: { user: string; password: string } | { token: string };
}

export interface NatsServerHandle {
  readonly url: string;
  readonly port: number;
  /** `nats-route://127.0.0.1:<clusterPort>` when the server has a cluster listener. */
  readonly clusterUrl?: string;
  /** `http://127.0.0.1:<port>` when `monitor` was set. */
  readonly monitorUrl?: string;
  readonly pid: number;
  readonly name: string;
  /** The server's log so far (stdout and stderr). */
  log(): string;
  /** Resolves once the server has at least `count` routes (needs `monitor: true`). */
  waitForRoutes(count: number, timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
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

/** Locate the nats-server binary, or throw telling how to install it. */
export function findNatsServer(explicit?: string): string {
  const candidates = explicit
    ? [explicit]
    : [
        ...(process.env.PATH ?? '')
          .split(delimiter)
          .filter(Boolean)
          .map((d) => join(d, 'nats-server')),
        '/usr/sbin/nats-server',
        '/usr/local/bin/nats-server',
        '/usr/bin/nats-server',
      ];
  for (const c of candidates) {
    try {
      accessSync(c, constants.X_OK);
      if (statSync(c).isFile()) return c;
    } catch {
      /* next */
    }
  }
  throw new NatsServerError(
    'missing-binary',
    `nats-server not found (looked at ${candidates.join(', ')}); install the Debian package: apt-get install nats-server`,
  );
}

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

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = createConnection({ host: '127.0.0.1', port });
    sock.once('connect', () => {
      sock.destroy();
      resolve(true);
    });
    sock.once('error', () => {
      sock.destroy();
      resolve(false);
    });
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function renderConfig(o: {
  port: number;
  name: string;
  maxPayload: number;
  maxPending: number;
  monitorPort?: number;
  cluster?: { port: number; name: string; routes: string[] };
  auth?: NatsServerOptions['auth'];
}): string {
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
  if (o.cluster) {
    lines.push(
      'cluster {',
      `  name: "${o.cluster.name}"`,
      `  listen: "127.0.0.1:${o.cluster.port}"`,
      '  no_advertise: true',
    );
    if (o.cluster.routes.length > 0) lines.push(`  routes: [${o.cluster.routes.map((r) => `"${r}"`).join(', ')}]`);
    lines.push('}');
  }
  return lines.join('\n') + '\n';
}

export async function startNatsServer(opts: NatsServerOptions = {}): Promise<NatsServerHandle> {
  const binary = findNatsServer(opts.binary);
  const maxPayload = opts.maxPayload ?? DEFAULT_MAX_PAYLOAD;
  const maxPending = opts.maxPending ?? 4 * maxPayload;
  if (maxPending <= maxPayload)
    throw new RangeError(`startNatsServer: maxPending ${maxPending} must exceed maxPayload ${maxPayload}`);
  const { port, clusterPort, monitorPort } = await serverPorts(opts);
  const name = opts.name ?? `baton-${port}`;
  const routes = opts.routes ?? [];

  // The cleanup is registered before the directory exists: a Ctrl-C at any point from
  // here on removes it (and the server, once spawned).
  let spawned: ChildProcess | undefined;
  let dir: string | undefined;
  const removeAll = () => {
    spawned?.kill('SIGKILL');
    if (dir) rmSync(dir, { recursive: true, force: true });
  };
  const forget = onProcessEnd(removeAll);
  let logFd = -1;
  let readFd = -1;
  let confFd = -1;
  let child: ChildProcess;
  try {
    dir = mkdtempSync(join(tmpdir(), 'baton-nats-'));
    const confPath = join(dir, 'nats.conf');
    const logPath = join(dir, 'nats.log');
    writeFileSync(
      confPath,
      renderConfig({
        port,
        name,
        maxPayload,
        maxPending,
        monitorPort,
        auth: opts.auth,
        cluster:
          clusterPort !== undefined ? { port: clusterPort, name: opts.clusterName ?? 'baton', routes } : undefined,
      }),
      { mode: 0o600 },
    );
    confFd = openSync(confPath, 'r');
    logFd = openSync(logPath, 'a');
    // The log is read through a descriptor of our own and written through the server's; the
    // server reads its config through the descriptor it gets as fd 3. So the directory goes
    // as soon as the server is spawned, not once it is up.
    readFd = openSync(logPath, 'r');
    const [command, args] = dieWithParent(binary, ['-c', '/dev/fd/3']);
    child = spawn(command, args, { stdio: ['ignore', logFd, logFd, confFd] });
    spawned = child;
    rmSync(dir, { recursive: true, force: true });
    for (const fd of [logFd, confFd]) closeSync(fd);
  } catch (err) {
    // Nothing of a server that could not be set up outlives this call.
    for (const fd of [logFd, readFd, confFd])
      if (fd >= 0)
        try {
          closeSync(fd);
        } catch {
          /* already closed */
        }
    removeAll();
    forget();
    throw err;
  }
  child.unref();
  let readClosed = false;
  const readLog = (): string => {
    if (readClosed) return finalLog;
    try {
      const buf = Buffer.alloc(fstatSync(readFd).size);
      readSync(readFd, buf, 0, buf.length, 0);
      return buf.toString('utf8');
    } catch {
      return '';
    }
  };
  let finalLog = '';
  const closeLog = () => {
    if (readClosed) return;
    finalLog = readLog();
    readClosed = true;
    try {
      closeSync(readFd);
    } catch {
      /* already closed */
    }
  };
  let exited: { code: number | null; signal: string | null; error?: Error } | undefined;
  // A child that could not be spawned at all reports 'error' and never 'exit'.
  const exitPromise = new Promise<void>((resolve) => {
    child.once('exit', (code, signal) => {
      exited ??= { code, signal };
      resolve();
    });
    child.once('error', (error) => {
      exited ??= { code: null, signal: null, error };
      resolve();
    });
  });

  let stopped = false;
  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    if (!exited) {
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 2000);
      await exitPromise;
      clearTimeout(t);
    }
    closeLog();
    forget();
  };

  const timeout = opts.startTimeoutMs ?? 10_000;
  const deadline = Date.now() + timeout;
  for (;;) {
    if (exited) {
      const log = readLog();
      await stop();
      if (exited.error) throw new NatsServerError('exited', `cannot start ${binary}: ${exited.error.message}`);
      throw new NatsServerError(
        'exited',
        `nats-server exited (code ${exited.code}, signal ${exited.signal}) before accepting connections on 127.0.0.1:${port}; its output:\n${log}`,
      );
    }
    // The log line guards against a port taken by someone else answering our connect.
    if ((await canConnect(port)) && readLog().includes('Server is ready')) break;
    if (Date.now() > deadline) {
      const log = readLog();
      await stop();
      throw new NatsServerError(
        'start-timeout',
        `nats-server did not accept connections on 127.0.0.1:${port} within ${timeout} ms; its output:\n${log}`,
      );
    }
    await sleep(20);
  }
  const monitorUrl = monitorPort !== undefined ? `http://127.0.0.1:${monitorPort}` : undefined;
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    clusterUrl: clusterPort !== undefined ? `nats-route://127.0.0.1:${clusterPort}` : undefined,
    monitorUrl,
    pid: child.pid ?? -1,
    name,
    log: readLog,
    waitForRoutes: (count, timeoutMs = 10_000) => waitForRoutes(name, monitorUrl, count, timeoutMs),
    stop,
  };
}

/**
 * The server must not outlive the process that started it, even one killed with SIGKILL
 * (which runs no cleanup): where util-linux's setpriv is installed, the server is started
 * through it with a parent-death signal. Elsewhere it is started plainly.
 */
function dieWithParent(binary: string, args: string[]): [string, string[]] {
  const setpriv = setprivWithPdeathsig();
  return setpriv ? [setpriv, ['--pdeathsig', 'SIGKILL', binary, ...args]] : [binary, args];
}

let setprivFound: string | null | undefined;

/** setpriv, if installed and new enough to know --pdeathsig (util-linux 2.33+); looked up once. */
function setprivWithPdeathsig(): string | null {
  if (setprivFound !== undefined) return setprivFound;
  setprivFound = null;
  for (const p of ['/usr/bin/setpriv', '/bin/setpriv']) {
    const r = spawnSync(p, ['--help'], { encoding: 'utf8', timeout: 2000 });
    if (r.status === 0 && /--pdeathsig/.test(r.stdout)) {
      setprivFound = p;
      break;
    }
  }
  return setprivFound;
}

async function waitForRoutes(
  name: string,
  monitorUrl: string | undefined,
  count: number,
  timeoutMs: number,
): Promise<void> {
  if (!monitorUrl)
    throw new NatsServerError('no-monitor', `server ${name}: waitForRoutes needs startNatsServer({ monitor: true })`);
  const deadline = Date.now() + timeoutMs;
  let last = -1;
  for (;;) {
    try {
      const res = await fetch(`${monitorUrl}/routez`);
      last = ((await res.json()) as { num_routes?: number }).num_routes ?? 0;
      if (last >= count) return;
    } catch {
      /* not up yet */
    }
    if (Date.now() > deadline)
      throw new NatsServerError(
        'routes-timeout',
        `server ${name}: ${last} routes after ${timeoutMs} ms, wanted ${count}`,
      );
    await sleep(50);
  }
}
