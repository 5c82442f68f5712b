// `baton run`: a job on the real clock — in this process over the in-process bus, or
// over NATS with one OS process per stage (node agents this command spawns) or with
// node agents a user started (`--nodes`).

import { ChildProcess, spawn } from 'child_process';
import { randomBytes } from 'crypto';
import * as path from 'path';
import { MAX_TIMER_MS } from '../base/clock';
import { JobConfig } from '../job/config';
import { IterationRecord } from '../actors/coordinator';
import { runDistributed } from '../job/run-distributed';
import { JobResult, runJob, summarize } from '../job/run-local';
import { JobError, checkJob } from '../job/wire-stage';
import { MAX_NODE_NAME, NODE_NAME_RE } from '../actors/node-protocol';
import { filesAJobNames } from '../job/node-host';
import { NatsBus } from '../transport/nats-bus';
import { NatsServerHandle, startNatsServer } from '../transport/nats-server';
import { endBySignal, onProcessEnd } from '../transport/process-cleanup';
import { checkJobName } from '../transport/subjects';
import { FlagSpec, UsageError, helpText, parseFlags } from './args';
import { NATS_URL_ENV, NATS_URL_FORMS, natsFlag } from './nats-flag';
import { JOB_FLAGS, asyncStream, comparedPolicies, jobConfigFromFlags, speedupOver } from './job-flags';
import { formatTable } from './table';
import { RATIO_NOTE, REFERENCE_FLAG, WithReference, referenceColumns, withReference } from './reference-flag';
import { warnRejects } from './rejects';
import { claimJob } from '../job/job-claim';
import { checkTraceOutputs, writeComparedTraceFiles } from './trace-output';
import { STAGE_NODE_FLAGS_HELP, stageNodeFlags } from './stage-node-flags';
import { RUN_COMMAND_DEFAULTS } from '../job/defaults';
import { configForPrint } from './print-config';

const RUN_FLAGS: readonly FlagSpec[] = [
  ...JOB_FLAGS,
  {
    name: 'transport',
    type: 'string',
    help: 'message bus',
    choices: ['nats', 'local'],
    default: RUN_COMMAND_DEFAULTS.transport,
  },
  {
    name: 'nats',
    type: 'string',
    metavar: 'URL',
    help: `NATS server(s): ${NATS_URL_FORMS} (default: start a local nats-server on a free loopback port)`,
  },
  {
    name: 'processes',
    type: 'string',
    help: 'per-stage: one OS process per stage; single: all stages in this process',
    choices: ['per-stage', 'single'],
    default: RUN_COMMAND_DEFAULTS.processes,
  },
  {
    name: 'nodes',
    type: 'list',
    metavar: 'N1,N2,…',
    help: 'use running node agents (baton node) instead of spawning them; stages are dealt in contiguous blocks',
  },
  {
    name: 'compare',
    type: 'list',
    metavar: 'P1,P2,…',
    help: 'run the same seed under each policy and compare (speedup over the first); the k-th policy (from 0) runs as job <job>-k, so tap --job <job>-k watches it',
  },
  REFERENCE_FLAG,
  {
    name: 'trace',
    type: 'string',
    metavar: 'FILE.json',
    help: 'write a Chrome trace (Perfetto) of the run (with --compare: one per policy, the first at FILE, the others at FILE.<policy>.json)',
  },
  {
    name: 'gantt',
    type: 'string',
    metavar: 'FILE.svg',
    help: 'draw the pipeline Gantt chart (with --compare: one per policy, the first at FILE, the others at FILE.<policy>.svg)',
  },
  {
    name: 'warmup-iterations',
    type: 'int',
    metavar: 'W',
    help: 'iterations run first and left out of the statistics (JIT, connections); none with --mode async',
    default: RUN_COMMAND_DEFAULTS.warmupIterations,
  },
  {
    name: 'stall-timeout',
    type: 'int',
    metavar: 'MS',
    help: 'end with a deadlock error after this long without progress (at most 2147483647, the longest timer Node keeps); also the lease of the job on its node agents',
    default: RUN_COMMAND_DEFAULTS.stallTimeoutMs,
  },
  { name: 'json', type: 'bool', help: 'print JSON instead of a table' },
  { name: 'print-config', type: 'bool', help: 'print the resolved config and exit' },
  { name: 'help', type: 'bool', help: 'show this help' },
];

export const RUN_HELP =
  helpText(
    'run',
    'run a pipeline job on the real clock, over NATS (default) or in one process',
    'baton run [sim flags] [--transport nats|local] [--nats URL] [--processes per-stage|single] [--nodes N1,…] [--trace FILE.json] [--gantt FILE.svg] [--json]',
    RUN_FLAGS,
  ) + STAGE_NODE_FLAGS_HELP;

export interface RunSetup {
  transport: 'nats' | 'local';
  processes: 'per-stage' | 'single';
  natsUrl?: string;
  nodes?: string[];
  onIteration?: (r: IterationRecord) => void;
  /** Told the URL of the private nats-server a run without natsUrl starts, once it is up. */
  onServer?: (url: string, job: string) => void;
}

/** The `baton` command's entry point, for starting it as a child process. */
export const CLI_ENTRY = path.join(__dirname, 'main.js');

/** Stage processes this launcher started: stopped at the end, and on exit, SIGINT or SIGTERM. */
interface SpawnedNodes {
  readonly children: ChildProcess[];
  /** Rejects when one of them ends before stop() was called. */
  readonly died: Promise<never>;
  stop(): Promise<void>;
}

function spawnNodes(url: string, names: string[], nodeFlags: readonly string[], allowFiles: boolean): SpawnedNodes {
  let stopping = false;
  let died: (e: Error) => void = () => {};
  const diedPromise = new Promise<never>((_, reject) => (died = reject));
  diedPromise.catch(() => {});
  const children = names.map((name) => {
    const child = spawn(
      process.execPath,
      [
        ...nodeFlags,
        CLI_ENTRY,
        'node',
        '--name',
        name,
        '--quiet',
        '--exit-with-stdin',
        ...(allowFiles ? ['--allow-files'] : []),
      ],
      { stdio: ['pipe', 'ignore', 'pipe'], env: { ...process.env, [NATS_URL_ENV]: url } },
    );
    child.stderr?.on('data', (d: Buffer) => process.stderr.write(`[${name}] ${d}`));
    child.once('exit', (code, signal) => {
      if (!stopping)
        died(
          new JobError(
            `stage process ${name} (pid ${child.pid}) ended during the job (${signal ? `signal ${signal}` : `exit code ${code}`})`,
          ),
        );
    });
    return child;
  });
  const forget = onProcessEnd(() => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGTERM');
  });
  return {
    children,
    died: diedPromise,
    stop: async () => {
      stopping = true;
      await stopChildren(children);
      forget();
    },
  };
}

async function stopChildren(children: ChildProcess[]): Promise<void> {
  await Promise.all(
    children.map(
      (c) =>
        new Promise<void>((resolve) => {
          if (c.exitCode !== null || c.signalCode !== null) return resolve();
          const t = setTimeout(() => c.kill('SIGKILL'), 3000);
          c.once('exit', () => {
            clearTimeout(t);
            resolve();
          });
          c.kill('SIGTERM');
        }),
    ),
  );
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

/**
 * Refuses, before a nats-server or a stage process starts, stage processes on this machine
 * that could not start: more than MAX_LOCAL_STAGE_PROCESSES, or BATON_STAGE_NODE_FLAGS that are not flags.
 */
export function checkLocalProcesses(cfg: JobConfig, setup: RunSetup, command: string): void {
  if (setup.transport !== 'nats' || setup.processes !== 'per-stage' || setup.nodes) return;
  if (cfg.stages > MAX_LOCAL_STAGE_PROCESSES)
    throw new UsageError(
      `${command}: --processes per-stage starts ${cfg.stages} stage processes on this machine (about 60 MB each); at most ${MAX_LOCAL_STAGE_PROCESSES}: use --processes single${command === 'run' ? ', or --nodes to spread them' : ''}`,
    );
  stageNodeFlags();
}

/** One job on the real clock with the given transport and process layout. */
export async function runOnce(cfg: JobConfig, setup: RunSetup): Promise<RunOutcome> {
  // With --nodes the stages run elsewhere, and a profile file may exist only there.
  checkJob(cfg, { profileHere: !setup.nodes });
  if (setup.transport === 'local') {
    const result = await runJob(cfg, { clock: 'real', onIteration: setup.onIteration });
    return { result, transport: 'local', processes: 1, pids: [process.pid] };
  }
  let server: NatsServerHandle | null = null;
  let bus: NatsBus | null = null;
  let nodes: SpawnedNodes | null = null;
  let interrupts: ReturnType<typeof watchInterrupts> | null = null;
  let release: (() => void) | null = null;
  try {
    const url = setup.natsUrl ?? (server = await startNatsServer()).url;
    if (server) setup.onServer?.(url, cfg.job);
    bus = await NatsBus.connect(url, { name: `baton-run-${cfg.job}` });
    // A server of our own has no other jobs; a shared one may.
    if (!server) release = await claimJob(bus, cfg.job);
    // Core NATS keeps nothing that was in flight: once the launcher's connection drops (a
    // server of our own that died, a network cut), the job has lost messages, so it ends now.
    const dropped = bus
      .disconnected()
      .then((e) => Promise.reject(new JobError(`${e.message}: messages in flight are lost, the job cannot complete`)));
    dropped.catch(() => {});
    if (setup.processes === 'single' && !setup.nodes) {
      const result = await runJob(cfg, { clock: 'real', bus, onIteration: setup.onIteration, stop: dropped });
      return { result, transport: 'nats', processes: 1, pids: [process.pid], natsUrl: url };
    }
    // The stage processes skip the check that no other agent has their name (it would cost
    // each of them a round of asking): a suffix of this launch's own makes a clash with an
    // agent someone started by hand impossible in practice.
    const suffix = randomBytes(4).toString('hex');
    const names = setup.nodes ?? Array.from({ length: cfg.stages }, (_, s) => `${cfg.job}-stage${s}-${suffix}`);
    interrupts = watchInterrupts();
    // Agents of our own may load the files this launcher's user named; built-in names need no files.
    if (!setup.nodes) nodes = spawnNodes(url, names, stageNodeFlags(), filesAJobNames(cfg).length > 0);
    const stop = Promise.race([interrupts.interrupted, dropped, ...(nodes ? [nodes.died] : [])]);
    const result = await runDistributed(cfg, { bus, nodes: names, onIteration: setup.onIteration, stop });
    const pids = distinctProcesses(result.nodes).map((p) => p.pid);
    return { result, transport: 'nats', processes: pids.length, pids, natsUrl: url };
  } finally {
    if (nodes) await nodes.stop();
    release?.();
    if (bus) await bus.close();
    if (server) await server.stop();
    interrupts?.dispose();
    const sig = interrupts?.signal();
    if (sig) endBySignal(sig);
  }
}

/** One entry per OS process the nodes ran in: agents on different machines can have the same pid. */
export function distinctProcesses(nodes: readonly { pid: number; host: string }[]): { pid: number; host: string }[] {
  const seen = new Map<string, { pid: number; host: string }>();
  for (const n of nodes) seen.set(JSON.stringify([n.host, n.pid]), { pid: n.pid, host: n.host });
  return [...seen.values()];
}

function summary(o: RunOutcome) {
  return { ...summarize(o.result), transport: o.transport, processes: o.processes, pids: o.pids };
}

/** Stage processes `run --processes per-stage` starts on this machine, at most (about 60 MB each). */
export const MAX_LOCAL_STAGE_PROCESSES = 64;

export async function runCommand(argv: readonly string[], out: (s: string) => void): Promise<number> {
  const { flags, given } = parseFlags(argv, RUN_FLAGS, 'run');
  if (flags.help) {
    out(RUN_HELP);
    return 0;
  }
  const cfg: JobConfig = asyncStream({
    ...jobConfigFromFlags(flags),
    stallTimeoutMs: flags.stallTimeout as number,
    warmupIterations: flags.warmupIterations as number,
  });
  if (!Number.isInteger(cfg.warmupIterations) || cfg.warmupIterations < 0)
    throw new UsageError(`run: --warmup-iterations must be an integer >= 0, got ${cfg.warmupIterations}`);
  if (cfg.mode === 'async' && given.has('warmupIterations') && cfg.warmupIterations > 0)
    throw new UsageError(
      'run: asynchronous mode runs one stream of microbatches; it has no warm-up iteration (drop --warmup-iterations)',
    );
  if (cfg.mode === 'async') cfg.warmupIterations = 0;
  if (!(cfg.stallTimeoutMs > 0 && cfg.stallTimeoutMs <= MAX_TIMER_MS))
    throw new UsageError(
      `run: --stall-timeout must be between 1 and ${MAX_TIMER_MS} ms (the longest timer Node keeps), got ${cfg.stallTimeoutMs}`,
    );
  const setup: RunSetup = {
    transport: flags.transport as 'nats' | 'local',
    processes: flags.processes as 'per-stage' | 'single',
    natsUrl: flags.nats === undefined ? undefined : natsFlag(flags.nats, 'run'),
    nodes: flags.nodes as string[] | undefined,
    onServer: (url, job) =>
      process.stderr.write(
        `run: job ${job} on a nats-server of its own at ${url}; watch it with baton tap --nats ${url} --job ${job}\n`,
      ),
  };
  if (setup.transport === 'local' && (setup.natsUrl || setup.nodes))
    throw new UsageError('run: --nats and --nodes need --transport nats');
  if (setup.transport === 'local' && given.has('processes'))
    throw new UsageError('run: --transport local runs every stage in this process; --processes needs --transport nats');
  if (setup.nodes && setup.processes === 'single')
    throw new UsageError('run: --nodes runs the stages on those nodes; it takes no --processes single');
  for (const n of setup.nodes ?? []) {
    if (!NODE_NAME_RE.test(n))
      throw new UsageError(
        `run: --nodes: node names match [A-Za-z0-9_-]+ (as baton node --name), got ${JSON.stringify(n)}`,
      );
    if (n.length > MAX_NODE_NAME)
      throw new UsageError(
        `run: --nodes: a node name is at most ${MAX_NODE_NAME} characters (as baton node --name), got one of ${n.length}`,
      );
  }
  if (setup.nodes && new Set(setup.nodes).size !== setup.nodes.length)
    throw new UsageError(`run: --nodes names a node twice: ${setup.nodes.join(',')}`);
  if (setup.nodes && !setup.natsUrl)
    throw new UsageError(
      'run: --nodes needs --nats URL, the server those node agents joined (without it the run starts a private server no agent knows)',
    );
  if (setup.nodes && setup.nodes.length > cfg.stages)
    throw new UsageError(
      `run: --nodes names ${setup.nodes.length} agents for ${cfg.stages} stages; each agent hosts at least one stage, so ${setup.nodes.slice(cfg.stages).join(',')} would get none`,
    );
  checkLocalProcesses(cfg, setup, 'run');
  const compare = comparedPolicies(flags, given, 'run');
  const policies = compare ?? [cfg.policy];
  // Each run of a comparison is its own job, so their messages never mix: J-0, J-1, ...
  const jobOf = (k: number) => (policies.length > 1 ? `${cfg.job}-${k}` : cfg.job);
  try {
    policies.forEach((_, k) => checkJobName(jobOf(k)));
  } catch (err) {
    throw new UsageError(
      policies.length > 1
        ? `run: --compare runs policy k as job ${cfg.job}-k; ${(err as Error).message}`
        : `run: --job: ${(err as Error).message}`,
    );
  }
  // Every policy of a comparison is checked before the first one runs (or is printed as runnable).
  for (const policy of policies) checkJob({ ...cfg, policy }, { profileHere: !setup.nodes });
  if (flags.printConfig) {
    out(configForPrint(cfg, { ...setup, clock: 'real' }));
    return 0;
  }
  checkTraceOutputs('run', flags.trace as string | undefined, flags.gantt as string | undefined, policies);
  const outcomes: RunOutcome[] = [];
  for (const policy of policies) outcomes.push(await runOnce({ ...cfg, policy, job: jobOf(outcomes.length) }, setup));
  const written = writeComparedTraceFiles(
    outcomes.map((o) => o.result),
    flags.trace as string | undefined,
    flags.gantt as string | undefined,
  );
  for (const o of outcomes) warnRejects('run', o.result);
  // One process: every stage on one clock, so message times are measured (as the bound takes them).
  const rows = withReference(
    flags,
    outcomes.map(summary),
    outcomes.map((o) => o.result),
    outcomes.every((o) => o.processes === 1),
  );
  const speedup = (ms: number) => speedupOver(rows[0].makespan_ms, ms);
  if (flags.json) {
    // With --compare, always a list (one row per compared policy), as sim prints.
    out(JSON.stringify(compare ? rows.map((r) => ({ ...r, speedup: speedup(r.makespan_ms) })) : rows[0]));
    return 0;
  }
  out(runTable(rows, cfg));
  for (const w of written) out(`wrote ${w}`);
  return 0;
}

/** The table of a run or a comparison (with the offline columns and the ratio note when the reference was computed). */
function runTable(rows: WithReference<ReturnType<typeof summary>>[], cfg: JobConfig): string {
  const ref = referenceColumns(rows);
  const speedup = (ms: number) => speedupOver(rows[0].makespan_ms, ms);
  return (
    formatTable(
      [
        'policy',
        'makespan ms',
        `speedup vs ${rows[0].policy}`,
        'lower bound ms',
        'efficiency',
        ...ref.head,
        'messages',
        'processes',
      ],
      rows.map((r) => [
        r.policy,
        r.makespan_ms.toFixed(1),
        `${speedup(r.makespan_ms).toFixed(2)}x`,
        r.lower_bound_ms.toFixed(1),
        r.efficiency.toFixed(3),
        ...ref.cells(r),
        String(r.messages),
        String(r.processes),
      ]),
      `real clock, transport=${rows[0].transport}, P=${cfg.stages} M=${cfg.microbatches} V=${cfg.chunks} profile=${cfg.profile} jitter=${cfg.jitter} scale=${cfg.jitterScale} seed=${cfg.seed} iterations=${cfg.iterations}`,
    ) + (ref.head.length > 0 ? `\n${RATIO_NOTE}` : '')
  );
}
