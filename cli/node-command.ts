// `baton node`: a node agent process that hosts stage actors on request.

import * as os from 'os';
import { MAX_NODE_NAME, NODE_NAME_RE, NodeSubjects, STANDALONE_NODES, jobNodeSubjects } from '../actors/node-agent';
import { checkJobName } from '../transport/subjects';
import { askAround } from '../transport/ask-around';
import { NatsBus, NatsBusError } from '../transport/nats-bus';
import { Bus } from '../transport/bus';
import { HELP_FLAG, FlagSpec, UsageError, helpText, parseFlags, printedHelp } from './args';
import { NATS_ACCESS_FLAGS, NATS_URL_ENV, NATS_URL_FORMS, natsAccessOf, natsFlag, natsUrlOf } from './nats-flag';
import { newNodeAgent, realPath } from '../job/node-host';
import { existsSync } from 'fs';
import { AuthBus } from '../transport/auth-bus';
import { parseKey } from '../transport/auth-seal';
import { readKeyFile } from './key-file';
import { startHeartbeat } from '../job/heartbeat';
import { NODE_SERVICE_NAME } from '../actors/node-capabilities';
import { NODE_SERVICE_FLAGS, measureOptionsOf, serveAsService } from './node-service-flags';
import { readLines } from './stdin-lines';

const NODE_FLAGS: readonly FlagSpec[] = [
  {
    name: 'nats',
    type: 'string',
    metavar: 'URL',
    help: `NATS server(s) to join: ${NATS_URL_FORMS} (required, or ${NATS_URL_ENV} or NATS_URL in the environment)`,
  },
  ...NATS_ACCESS_FLAGS,
  {
    name: 'name',
    type: 'string',
    metavar: 'NAME',
    help: 'node name, unique among the nodes of a NATS system (default node-<pid>)',
  },
  {
    name: 'job',
    type: 'string',
    metavar: 'NAME',
    help: "serve only job NAME, reached on that job's subjects (baton.NAME.node.…) instead of the shared baton._nodes.…: baton run starts its stage processes so, and one permission on baton.NAME.> covers them (default: any job of its key)",
  },
  { name: 'quiet', type: 'bool', help: 'do not log hosting events' },
  {
    name: 'json',
    type: 'bool',
    help: 'print one JSON line when ready ({node, pid, nats, ready: true}) and log as JSON lines on stderr',
  },
  {
    name: 'exit-with-stdin',
    type: 'bool',
    help: 'exit when stdin closes (baton run starts its stage processes so: they end with it, even if it is killed)',
  },
  {
    name: 'private',
    type: 'bool',
    help: "a launch's own stage process: not registered as the NATS service baton-node (so not calibrated either), and its name, the job's with a random suffix, skips the check that no other node has it",
  },
  {
    name: 'key-file',
    type: 'string',
    metavar: 'FILE',
    help: 'the key its launchers hold (baton auth key FILE writes one; mode 600): every request and message is sealed under it, and what is not is refused (required, or --key-stdin)',
  },
  {
    name: 'key-stdin',
    type: 'bool',
    help: "read the key from the first line of stdin (baton run hands its stage processes the launch's key so: never on a command line or in the environment)",
  },
  {
    name: 'nats-stdin',
    type: 'bool',
    help: 'with --key-stdin: read the server URL, with its credentials, from the second line of stdin (baton run hands its stage processes their own NATS user so, never on a command line)',
  },
  {
    name: 'allow-files',
    type: 'list',
    metavar: 'PATH,…',
    help: 'the files and directories whose policy modules, profile files, training corpora and checkpoints a launcher may name (each must exist; a job naming any other file is refused; default none)',
  },
  ...NODE_SERVICE_FLAGS,
  HELP_FLAG,
];

export const NODE_HELP =
  helpText(
    'node',
    'start a node agent that hosts stage actors for jobs over NATS',
    'baton node --nats URL --key-file FILE [--name NAME] [--tag K=V,…] [--allow-files PATH,…] [--quiet] [--json]',
    NODE_FLAGS,
  ) +
  `\nA node agent (without --private) registers as the NATS service ${NODE_SERVICE_NAME} once it has calibrated: its INFO metadata carries its capabilities (backend, GFLOP/s, cores, memory, tags), its STATS what it hosts; baton nodes lists them. With --json it then prints {node, service, id, registered: true}.\n`;

export async function nodeCommand(argv: readonly string[], out: (s: string) => void): Promise<number> {
  const { flags } = parseFlags(argv, NODE_FLAGS, 'node');
  if (printedHelp(flags, NODE_HELP, out)) return 0;
  const name = nameFromFlags(flags);
  const job = flags.job === undefined ? undefined : checkJobName(String(flags.job));
  const subjects = job === undefined ? STANDALONE_NODES : jobNodeSubjects(job);
  // A bad --nats is named before a missing key; with --nats-stdin the URL comes after the key.
  const flagUrl = flags.natsStdin ? undefined : urlFromFlags(flags);
  const { key, url: stdinUrl } = await secretsFromFlags(flags);
  const url = (stdinUrl ?? flagUrl) as string;
  const access = natsAccessOf(flags, 'node', url);
  const measureOptions = measureOptionsOf(flags);
  const nats = await NatsBus.connect(url, {
    name: `baton-node-${name}`,
    access: access.access,
    accessNames: access.names,
  });
  const bus = new AuthBus(nats, key, `node:${name}`);
  const log = flags.quiet
    ? () => {}
    : flags.json
      ? (l: string) => process.stderr.write(`${JSON.stringify({ node: name, log: l })}\n`)
      : (l: string) => process.stderr.write(`${l}\n`);
  // Stage processes a launcher starts have names of that launch's own; others ask first.
  if (!flags.private) await refuseTakenName(bus, name, nats.url, subjects);
  const agent = newNodeAgent({ name, bus, log, allowedFiles: allowedFilesOf(flags.allowFiles), job });
  const stopBeating = startHeartbeat(url, key, name, log, access.access, subjects);
  void agent.exited.then(stopBeating);
  leaveOnReconnect(nats, agent, name, log);
  agent.start();
  const stopper = stopperOf(agent, bus);
  // Before the ready line: whoever reads it may signal at once.
  process.once('SIGTERM', () => stopper.stop('SIGTERM'));
  process.once('SIGINT', () => stopper.stop('SIGINT'));
  if (flags.json) out(JSON.stringify({ node: name, pid: process.pid, nats: nats.url, ready: true }));
  else log(`node ${name}: ready on ${nats.url} (pid ${process.pid})`);
  // Stage processes of one launch stay private to it; other agents can be discovered.
  if (!flags.private) {
    serveAsService({
      connection: nats.connection,
      hosting: () => ({ jobs: agent.hosting() }),
      exited: agent.exited,
      measure: { ...measureOptions, node: name },
      registered: (id) => {
        if (flags.json) out(JSON.stringify({ node: name, service: NODE_SERVICE_NAME, id, registered: true }));
        else log(`node ${name}: registered as NATS service ${NODE_SERVICE_NAME} (id ${id})`);
      },
      log,
    });
  }
  if (flags.exitWithStdin) {
    // The launcher holds the other end of stdin; it closes when the launcher ends, however it ends.
    const gone = () => {
      if (!stopper.stopping()) log(`node ${name}: stdin closed; exiting (--exit-with-stdin)`);
      stopper.stop('its launcher ended');
    };
    process.stdin.once('close', gone);
    process.stdin.once('end', gone);
    process.stdin.on('error', gone);
    process.stdin.resume();
  }
  const lost = await Promise.race([agent.exited.then(() => null), nats.lost()]);
  // Our own close on a signal ends the connection too; the process is about to exit.
  if (stopper.stopping()) return new Promise<number>(() => {});
  if (lost)
    throw new NatsBusError(
      `node ${name}: lost the connection to NATS at ${nats.url} (${lost.message}); the jobs it hosted are gone`,
    );
  // Asked to exit: the launchers' leaving messages go out first, as on a signal.
  await flushAndClose(bus);
  return 0;
}

/** The server: --nats, else the environment. */
function urlFromFlags(flags: Record<string, unknown>): string {
  const url = natsUrlOf(flags.nats, 'node');
  if (url === undefined)
    throw new UsageError(`node: --nats URL is required (or ${NATS_URL_ENV} or NATS_URL in the environment)`);
  return url;
}

/** The agent's name (--name, else node-<pid>), checked. */
function nameFromFlags(flags: Record<string, unknown>): string {
  const name = flags.name === undefined ? `node-${process.pid}` : String(flags.name);
  if (!NODE_NAME_RE.test(name))
    throw new UsageError(`node: --name must match [A-Za-z0-9_-]+, got ${JSON.stringify(name)}`);
  if (name.length > MAX_NODE_NAME)
    throw new UsageError(
      `node: --name is ${name.length} characters, over the ${MAX_NODE_NAME} its subject (baton._nodes.<name>) has room for`,
    );
  return name;
}

/**
 * The key of --key-file, or of stdin's first line with --key-stdin (one of them is required),
 * and with --nats-stdin the server URL (its credentials in it) of the next line.
 */
async function secretsFromFlags(flags: Record<string, unknown>): Promise<{ key: Uint8Array; url?: string }> {
  if (flags.keyStdin && flags.keyFile !== undefined)
    throw new UsageError('node: give --key-file or --key-stdin, not both');
  if (flags.natsStdin && !flags.keyStdin) throw new UsageError('node: --nats-stdin needs --key-stdin');
  if (flags.natsStdin && flags.nats !== undefined) throw new UsageError('node: give --nats or --nats-stdin, not both');
  if (flags.keyFile !== undefined) return { key: readKeyFile(String(flags.keyFile), 'node: --key-file') };
  if (flags.keyStdin) {
    const lines = await readLines(process.stdin, flags.natsStdin ? 2 : 1).catch((e: Error) => {
      throw new UsageError(`node: --key-stdin: ${e.message}`);
    });
    const key = parseKey(lines[0]);
    if (!key) throw new UsageError('node: --key-stdin: the first line of stdin is not a Baton key');
    return { key, ...(flags.natsStdin ? { url: natsFlag(lines[1], 'node', '--nats-stdin') } : {}) };
  }
  throw new UsageError(
    'node: --key-file FILE is required (baton auth key FILE writes one; its launchers take it with --node-key-file): an agent takes no request it cannot authenticate',
  );
}

/** --allow-files as real paths: each must exist (a typo would otherwise allow nothing, or a later file). */
function allowedFilesOf(list: unknown): string[] {
  const given = (list as string[] | undefined) ?? [];
  return given.map((p) => {
    if (!existsSync(p)) throw new UsageError(`node: --allow-files: ${JSON.stringify(p)} does not exist`);
    return realPath(p);
  });
}

type NodeAgent = ReturnType<typeof newNodeAgent>;

/**
 * Core NATS keeps nothing that was in flight: a dropped connection (a server cutting off a
 * slow consumer, a network cut) has lost messages to the stages hosted here, so their jobs
 * cannot complete. Once the client has reconnected (not before: nats.js drops what is
 * published while it is down), their launchers hear so instead of waiting out their stall
 * timeout, and the stages go.
 */
function leaveOnReconnect(bus: NatsBus, agent: NodeAgent, name: string, log: (l: string) => void): void {
  bus.onReconnect = () => {
    log(
      `node ${name}: its connection to NATS at ${bus.url} dropped and came back; dropping the jobs it hosted (messages to their stages were lost)`,
    );
    agent.leave(`its connection to NATS at ${bus.url} dropped: messages in flight to its stages were lost`);
  };
}

/** Stopping on a signal or a closed stdin: the agent leaves, its last messages go out, the process exits. */
function stopperOf(agent: NodeAgent, bus: Bus): { stop(why: string): void; stopping(): boolean } {
  let stopping = false;
  return {
    stop: (why) => {
      stopping = true;
      agent.leave(why);
      void flushAndClose(bus).finally(() => process.exit(0));
    },
    stopping: () => stopping,
  };
}

/** Flushes and closes the connection; a server that stopped answering must not keep a stopped agent alive. */
async function flushAndClose(bus: Bus): Promise<void> {
  await withinMs(
    bus.flush().catch(() => {}),
    EXIT_FLUSH_MS,
  );
  await withinMs(
    bus.close().catch(() => {}),
    EXIT_FLUSH_MS,
  );
}

/** How long a stopping agent waits for its server to take its last messages, and then to close. */
const EXIT_FLUSH_MS = 2000;

/** `p`, or nothing once `ms` have passed. */
function withinMs(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)));
  return Promise.race([p.then(() => {}), late]).finally(() => clearTimeout(timer));
}

/** Two agents of one name would both take the requests meant for one: the second refuses to start. */
async function refuseTakenName(bus: Bus, name: string, url: string, at: NodeSubjects, waitMs = 300): Promise<void> {
  const holders = await askAround(bus, {
    listen: at.announce,
    ask: at.request(name),
    question: { verb: 'ping' },
    waitMs,
    pick: (r) =>
      r.verb === 'hello' && r.name === name && !(r.pid === process.pid && r.host === os.hostname()) ? r : null,
  });
  const h = holders[0];
  if (h) {
    await bus.close();
    throw new UsageError(
      `node: a node named ${name} is already running on ${url} (pid ${String(h.pid)} on ${String(h.host)}); give this one another --name`,
    );
  }
}
