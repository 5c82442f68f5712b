// One job on the real clock (`baton run`, `baton train`): on the in-process bus, on NATS in
// this process, or on NATS with node agents, spawned here (one OS process per stage, stopped
// with the job and on SIGINT or SIGTERM) or started by a user (--nodes).

import { randomBytes } from 'crypto';
import { JobConfig } from '../job/config';
import { IterationRecord } from '../actors/coordinator';
import { EventSink } from '../stage/events';
import { RecoveryOptions, runDistributed } from '../job/run-distributed';
import { SpawnedNodes, spawnNodes } from './stage-processes';
import { JobResult, runJob } from '../job/run-local';
import { JobError, checkJob } from '../job/wire-stage';
import { PermissionDeniedError } from '../job/job-errors';
import { filesOfJob, realPath } from '../job/node-host';
import { NatsBus } from '../transport/nats-bus';
import { OwnServer, startOwnServer } from './own-server';
import { endBySignal } from '../transport/process-cleanup';
import { ResolvedAccess } from './nats-flag';
import { claimJob } from '../job/job-claim';
import { jobNodeSubjects } from '../actors/node-agent';
import { stageNodeFlags } from './stage-node-flags';
import { SwapOptions } from '../job/policy-control';
import { UsageError } from './args';
import { AuthBus } from '../transport/auth-bus';
import { newJobKey } from '../transport/auth-seal';
import { lanesOf } from '../transport/lanes';
import { recoverable } from '../job/recovery';
import { TRAIN_COMMAND_DEFAULTS } from '../job/defaults';
import { hostsOf } from './node-hosts';

export { CLI_ENTRY } from './stage-processes';

export interface RunSetup {
  transport: 'nats' | 'local';
  processes: 'per-stage' | 'single';
  natsUrl?: string;
  /** TLS and credentials files for natsUrl (--tls-ca, --creds, …), which the stage processes started get too. */
  natsAccess?: ResolvedAccess;
  nodes?: string[];
  /** With nodes [discover]: what a discovered node must have (tags, backend). */
  require?: Record<string, string>;
  onIteration?: (r: IterationRecord) => void;
  /** Extra consumers of the job's events as they come (progress lines). */
  sinks?: EventSink[];
  /** Native-kernel threads of each stage process it starts (default: env BATON_THREADS, else cores / stage processes). */
  threads?: number;
  /** The key the node agents of `nodes` were started with (--node-key-file); required with nodes. */
  nodeKey?: Uint8Array;
  /** The key to seal the job under (--key-file) instead of one drawn for this launch; not with nodes. */
  jobKey?: Uint8Array;
  /** Told about the private nats-server a run without natsUrl starts, once it is up: its URL (no
   * credentials), the file (mode 600) holding a URL with credentials that may watch the job, its log. */
  onServer?: (s: { url: string; job: string; tapUrlFile: string; log: () => string }) => void;
  /** Scripted swaps and the modules swaps may load (--swap-at, --swap-modules). */
  swaps?: SwapOptions;
  /** Lost stage processes this launcher started that a sync job survives by replaying the iteration (--max-restarts; 0: none). */
  maxRestarts?: number;
  /** A recovering sync training job: flushes between the states each stage sends (--state-every; default TRAIN_COMMAND_DEFAULTS). */
  stateEvery?: number;
}

/**
 * SIGINT or SIGTERM during a distributed job: the job ends through its own cleanup (abort
 * sent to the nodes, stage processes stopped, server stopped), then the signal takes its
 * default effect. A second signal ends the process at once.
 */
function watchInterrupts(): { interrupted: Promise<never>; signal(): NodeJS.Signals | null; dispose(): void } {
  let got: NodeJS.Signals | null = null;
  let fail: (e: Error) => void = () => {};
  const interrupted = new Promise<never>((_, reject) => (fail = reject));
  interrupted.catch(() => {});
  const on = (sig: NodeJS.Signals) => () => {
    got = sig;
    fail(new JobError(`interrupted by ${sig}`));
  };
  const handlers = { SIGINT: on('SIGINT'), SIGTERM: on('SIGTERM') };
  process.once('SIGINT', handlers.SIGINT);
  process.once('SIGTERM', handlers.SIGTERM);
  return {
    interrupted,
    signal: () => got,
    dispose: () => {
      process.removeListener('SIGINT', handlers.SIGINT);
      process.removeListener('SIGTERM', handlers.SIGTERM);
    },
  };
}

export interface RunOutcome {
  result: JobResult;
  transport: string;
  processes: number;
  pids: number[];
  natsUrl?: string;
}

/** One job on the real clock with the given transport and process layout. */
export async function runOnce(cfg: JobConfig, setup: RunSetup): Promise<RunOutcome> {
  // With --nodes the stages run elsewhere, and a profile file may exist only there.
  checkJob(cfg, { profileHere: !setup.nodes });
  if (setup.swaps && setup.transport === 'nats' && (setup.processes !== 'single' || setup.nodes))
    throw new UsageError(
      '--swap-at and --swap-modules need the stages in this process (--processes single or --transport local); a job of node agents takes no swaps',
    );
  if (setup.transport === 'local')
    return { result: await runInProcess(cfg, setup), transport: 'local', processes: 1, pids: [process.pid] };
  return runOverNats(cfg, setup);
}

/** The job over NATS: a server of its own or the one given, and everything started for it stopped at the end. */
async function runOverNats(cfg: JobConfig, setup: RunSetup): Promise<RunOutcome> {
  let server: OwnServer | null = null;
  let nats: NatsBus | null = null;
  let nodes: SpawnedNodes | null = null;
  let interrupts: ReturnType<typeof watchInterrupts> | null = null;
  let release: (() => void) | null = null;
  try {
    // The stage processes skip the check that no other agent has their name (it would cost
    // each of them a round of asking): a suffix of this launch's own makes a clash with an
    // agent someone started by hand impossible in practice.
    const suffix = randomBytes(4).toString('hex');
    const perStage = setup.processes !== 'single' && !setup.nodes;
    const ownNames = stageProcessNames(cfg, suffix);
    if (!setup.natsUrl) server = await startOwnServer(cfg, perStage ? ownNames : []);
    const url = server ? server.launcherUrl : (setup.natsUrl as string);
    if (server)
      setup.onServer?.({ url: server.server.url, job: cfg.job, tapUrlFile: server.tapUrlFile, log: server.server.log });
    // TLS and credential files are for a server given by URL; our own has generated users.
    const access = server ? undefined : setup.natsAccess;
    nats = await NatsBus.connect(url, {
      name: `baton-run-${cfg.job}`,
      access: access?.access,
      accessNames: access?.names,
    });
    // Everything of the job is sealed under the launch's key (agents started by hand: the key they hold).
    const key = setup.nodes ? nodeKeyOf(setup) : (setup.jobKey ?? newJobKey());
    const bus = new AuthBus(nats, key, 'launcher');
    // A server of our own has no other jobs; a shared one may.
    if (!server) release = await claimJob(nats, cfg.job);
    const { dropped, denied } = connectionEnds(nats);
    if (setup.processes === 'single' && !setup.nodes) {
      const result = await runInProcess(cfg, setup, { bus, stop: Promise.race([dropped, denied]) });
      return { result, transport: 'nats', processes: 1, pids: [process.pid], natsUrl: nats.url };
    }
    const { cfg: job, names } = await hostsOf(cfg, { nodes: setup.nodes, require: setup.require, nats, own: ownNames });
    interrupts = watchInterrupts();
    // Agents of our own may load the files this launcher's user named, and no others.
    const stageUrls = server ? server.stageUrls : names.map(() => url);
    if (perStage)
      nodes = spawnNodes(
        { urls: stageUrls, access },
        cfg.job,
        names,
        stageNodeFlags(),
        allowedFilesFor(cfg),
        key,
        setup.threads,
      );
    const recovery = recoveryOf(job, setup, nodes, server ? undefined : nats);
    // A drop ends the job unless recovery waits it out; a stage process's end, unless recovery restarts it.
    const stop = Promise.race([
      interrupts.interrupted,
      denied,
      ...(recovery?.connection ? [] : [dropped]),
      ...(nodes && !recovery ? [nodes.died] : []),
    ]);
    const result = await runDistributed(job, {
      bus,
      nodes: names,
      // Agents of our own are reached on the job's subjects; agents started by hand on the shared ones.
      nodeSubjects: setup.nodes ? undefined : jobNodeSubjects(cfg.job),
      onIteration: setup.onIteration,
      sinks: setup.sinks,
      stop,
      ...(recovery ? { recovery } : {}),
    });
    const pids = distinctProcesses(result.nodes).map((p) => p.pid);
    return { result, transport: 'nats', processes: pids.length, pids, natsUrl: nats.url };
  } finally {
    if (nodes) await nodes.stop();
    release?.();
    if (nats) await nats.close();
    if (server) await server.stop();
    interrupts?.dispose();
    const sig = interrupts?.signal();
    if (sig) endBySignal(sig);
  }
}

/** The job in this process, on the in-process bus or on `over`'s. */
function runInProcess(cfg: JobConfig, setup: RunSetup, over: { bus?: AuthBus; stop?: Promise<never> } = {}) {
  return runJob(cfg, {
    clock: 'real',
    onIteration: setup.onIteration,
    sinks: setup.sinks,
    swaps: setup.swaps,
    ...over,
  });
}

/** Rejects once the launcher's connection drops: core NATS kept nothing that was in flight. */
function lostConnection(nats: NatsBus): Promise<never> {
  const dropped = nats
    .disconnected()
    .then((e) => Promise.reject(new JobError(`${e.message}: messages in flight are lost, the job cannot complete`)));
  dropped.catch(() => {});
  return dropped;
}

/**
 * What ends a job on the launcher's connection. Core NATS keeps nothing that was in flight:
 * once the connection drops (a server of our own that died, a network cut), the job has lost
 * messages (`dropped`). A publish or subscription the server refuses the launcher's user is
 * lost too (`denied`; the stages' own refusals their agents tell: job/launch-checks.ts).
 */
function connectionEnds(nats: NatsBus): { dropped: Promise<never>; denied: Promise<never> } {
  return { dropped: lostConnection(nats), denied: deniedHere(nats) };
}

/** Rejects at the first publish or subscription the server refuses the launcher's user. */
function deniedHere(nats: NatsBus): Promise<never> {
  const denied = new Promise<never>((_, reject) =>
    nats.watchDenials((d) => reject(new PermissionDeniedError('the launcher', d.operation, d.subject, d.message))),
  );
  denied.catch(() => {});
  return denied;
}

/**
 * A launcher recovers the stage processes it started (job/recovery.ts), and from a drop of its
 * connection to a server `given` by URL, which may come back (restarted, or another of its
 * cluster; our own does not); with --max-restarts 0, or a job it cannot replay, none.
 */
function recoveryOf(
  cfg: JobConfig,
  setup: RunSetup,
  nodes: SpawnedNodes | null,
  given: NatsBus | undefined,
): RecoveryOptions | undefined {
  const maxRestarts = setup.maxRestarts ?? 0;
  if (!nodes || maxRestarts === 0 || !recoverable(cfg)) return undefined;
  return {
    maxRestarts,
    stateEvery: setup.stateEvery ?? TRAIN_COMMAND_DEFAULTS.stateEvery,
    restart: (name) => nodes.restart(name),
    onExit: (l) => nodes.onExit(l),
    ...(given ? { connection: { onDrop: (l) => (given.onDisconnect = l), up: (ms) => given.up(ms) } } : {}),
  };
}

/** One stage process per stage or, in a job of T ranks × D replicas, per stage of every rank and replica (the order of assignBlocks). */
export function stageProcessNames(cfg: JobConfig, suffix: string): string[] {
  if (cfg.tp === 1 && cfg.dp === 1)
    return Array.from({ length: cfg.stages }, (_, s) => `${cfg.job}-stage${s}-${suffix}`);
  return lanesOf(cfg.tp, cfg.dp).flatMap((l) =>
    Array.from({ length: cfg.stages }, (_, s) => `${cfg.job}-stage${s}r${l.rank}d${l.replica}-${suffix}`),
  );
}

/** The files a job names, as the --allow-files of the stage processes that run it (a comma would split a path). */
function allowedFilesFor(cfg: JobConfig): string[] {
  const files = filesOfJob(cfg).map((f) => realPath(f.path));
  const split = files.find((f) => f.includes(','));
  if (split !== undefined)
    throw new UsageError(
      `the job names ${JSON.stringify(split)}: a path with a comma cannot be handed to a stage process`,
    );
  return files;
}

function nodeKeyOf(setup: RunSetup): Uint8Array {
  if (!setup.nodeKey)
    throw new UsageError(
      'run: --nodes needs --node-key-file FILE, the key file those node agents were started with (baton node --key-file)',
    );
  return setup.nodeKey;
}

/** One entry per OS process the nodes ran in: agents on different machines can have the same pid. */
export function distinctProcesses(nodes: readonly { pid: number; host: string }[]): { pid: number; host: string }[] {
  const seen = new Map<string, { pid: number; host: string }>();
  for (const n of nodes) seen.set(JSON.stringify([n.host, n.pid]), { pid: n.pid, host: n.host });
  return [...seen.values()];
}
