// Starting and stopping a local nats-server (the Debian package `nats-server`, 2.9)
// for the CLI, tests and benches: a generated config (nats-server-config.ts) on ports
// picked free (nats-server-ports.ts), readiness by TCP connect plus the server's own
// "ready" log line, and a cleanup on exit, SIGINT and SIGTERM (process-cleanup.ts) so no
// server outlives its parent. The child is unref'd: a forgotten server does not keep the
// parent alive, and the cleanup kills it. The config and the log are files in a temp dir
// that is removed as soon as the server is spawned (it reads the config through a
// descriptor it inherits, /dev/fd/3), and the server gets a parent-death signal where it
// can (nats-server-binary.ts), so not even SIGKILL of the parent, during the server's
// start or after it, leaves a server or a file behind.
//
// With `users`, the config is accounts-based (nats-server-config.ts): clients without
// credentials are refused, and each user gets only its permissions.
//
// Not modelled: TLS on routes, JetStream, leaf nodes, gateways, non-loopback client addresses.

import { ChildProcess, spawn } from 'child_process';
import { mkdtempSync, openSync, closeSync, fstatSync, readSync, rmSync, writeFileSync } from 'fs';
import { createConnection } from 'net';
import { tmpdir } from 'os';
import { join } from 'path';
import { onProcessEnd } from './process-cleanup';
import { DEFAULT_MAX_PAYLOAD, NatsServerOptions, renderConfig } from './nats-server-config';
import { serverPorts } from './nats-server-ports';
import { dieWithParent, findNatsServer } from './nats-server-binary';
import { NatsServerError } from './nats-server-error';

export interface NatsServerHandle {
  readonly url: string;
  readonly port: number;
  /** `nats-route://<clusterHost>:<clusterPort>` when the server has a cluster listener. */
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

export async function startNatsServer(opts: NatsServerOptions = {}): Promise<NatsServerHandle> {
  const binary = findNatsServer(opts.binary);
  const maxPayload = opts.maxPayload ?? DEFAULT_MAX_PAYLOAD;
  const maxPending = opts.maxPending ?? 4 * maxPayload;
  if (maxPending <= maxPayload)
    throw new RangeError(`startNatsServer: maxPending ${maxPending} must exceed maxPayload ${maxPayload}`);
  const { port, clusterPort, monitorPort } = await serverPorts(opts);
  const name = opts.name ?? `baton-${port}`;
  const routes = opts.routes ?? [];
  const config = renderConfig({
    port,
    name,
    maxPayload,
    maxPending,
    monitorPort,
    auth: opts.auth,
    users: opts.users,
    stock: opts.stock,
    cluster:
      clusterPort !== undefined
        ? { port: clusterPort, name: opts.clusterName ?? 'baton', routes, host: opts.clusterHost }
        : undefined,
    tls: opts.tls,
  });
  const { child, readFd, forget } = spawnServer(binary, config);
  child.unref();
  const log = serverLog(readFd);
  const server = watchServer(child, () => {
    log.close();
    forget();
  });
  await untilReady(binary, port, opts.startTimeoutMs ?? 10_000, server, log.read);
  const monitorUrl = monitorPort !== undefined ? `http://127.0.0.1:${monitorPort}` : undefined;
  return {
    url: `${opts.tls ? 'tls' : 'nats'}://127.0.0.1:${port}`,
    port,
    clusterUrl:
      clusterPort !== undefined ? `nats-route://${opts.clusterHost ?? '127.0.0.1'}:${clusterPort}` : undefined,
    monitorUrl,
    pid: child.pid ?? -1,
    name,
    log: log.read,
    waitForRoutes: (count, timeoutMs = 10_000) => waitForRoutes(name, monitorUrl, count, timeoutMs),
    stop: server.stop,
  };
}

/**
 * Spawns the server on `config`, with its output to a log file read through `readFd`. The
 * temp dir of the two files is gone when this returns, and `forget` unregisters the
 * cleanup that kills the server when this process ends.
 */
function spawnServer(binary: string, config: string): { child: ChildProcess; readFd: number; forget: () => void } {
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
  try {
    dir = mkdtempSync(join(tmpdir(), 'baton-nats-'));
    const confPath = join(dir, 'nats.conf');
    const logPath = join(dir, 'nats.log');
    writeFileSync(confPath, config, { mode: 0o600 });
    confFd = openSync(confPath, 'r');
    logFd = openSync(logPath, 'a');
    // The log is read through a descriptor of our own and written through the server's; the
    // server reads its config through the descriptor it gets as fd 3. So the directory goes
    // as soon as the server is spawned, not once it is up.
    readFd = openSync(logPath, 'r');
    const [command, args] = dieWithParent(binary, ['-c', '/dev/fd/3']);
    const child = spawn(command, args, { stdio: ['ignore', logFd, logFd, confFd] });
    spawned = child;
    rmSync(dir, { recursive: true, force: true });
    for (const fd of [logFd, confFd]) closeSync(fd);
    return { child, readFd, forget };
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
}

/** The server's log so far, read through `readFd` until close(); afterwards, what it was then. */
function serverLog(readFd: number): { read: () => string; close: () => void } {
  let readClosed = false;
  let finalLog = '';
  const read = (): string => {
    if (readClosed) return finalLog;
    try {
      const buf = Buffer.alloc(fstatSync(readFd).size);
      readSync(readFd, buf, 0, buf.length, 0);
      return buf.toString('utf8');
    } catch {
      return '';
    }
  };
  const close = () => {
    if (readClosed) return;
    finalLog = read();
    readClosed = true;
    try {
      closeSync(readFd);
    } catch {
      /* already closed */
    }
  };
  return { read, close };
}

interface WatchedServer {
  /** How the server ended, once it has: exited, or never spawned at all (error). */
  exited(): { code: number | null; signal: string | null; error?: Error } | undefined;
  /** SIGTERM, SIGKILL 2 s later if it has not exited, then `release`; once. */
  stop(): Promise<void>;
}

function watchServer(child: ChildProcess, release: () => void): WatchedServer {
  let exited: ReturnType<WatchedServer['exited']>;
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
    release();
  };
  return { exited: () => exited, stop };
}

/** Resolves once the server accepts connections and has logged that it is ready; stops it
 * and throws NatsServerError, with its output, if it exits or `timeout` ms pass first. */
async function untilReady(
  binary: string,
  port: number,
  timeout: number,
  server: WatchedServer,
  readLog: () => string,
): Promise<void> {
  const deadline = Date.now() + timeout;
  for (;;) {
    const exited = server.exited();
    if (exited) {
      const log = readLog();
      await server.stop();
      if (exited.error) throw new NatsServerError('exited', `cannot start ${binary}: ${exited.error.message}`);
      throw new NatsServerError(
        'exited',
        `nats-server exited (code ${exited.code}, signal ${exited.signal}) before accepting connections on 127.0.0.1:${port}; its output:\n${log}`,
      );
    }
    // The log line guards against a port taken by someone else answering our connect.
    if ((await canConnect(port)) && readLog().includes('Server is ready')) return;
    if (Date.now() > deadline) {
      const log = readLog();
      await server.stop();
      throw new NatsServerError(
        'start-timeout',
        `nats-server did not accept connections on 127.0.0.1:${port} within ${timeout} ms; its output:\n${log}`,
      );
    }
    await sleep(20);
  }
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
