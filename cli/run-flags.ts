// The flags of `baton run` and the checks of their combinations, and the limit on the stage
// processes one machine starts (which `baton train` checks too).

import { MAX_TIMER_MS } from '../base/clock';
import { JobConfig } from '../job/config';
import { MAX_NODE_NAME, NODE_NAME_RE } from '../actors/node-protocol';
import { CONFIG_FLAG, HELP_FLAG, PRINT_CONFIG_FLAG, FlagSpec, ParsedFlags, UsageError, helpText } from './args';
import { NATS_URL_FORMS, natsUrlOf } from './nats-flag';
import { JOB_FLAGS, asyncStream, jobConfigFromFlags } from './job-flags';
import { JOB_KEY_FILE_FLAG, SWAP_FLAGS, swapOptionsFromFlags } from './swap-flags';
import { STAGE_NODE_FLAGS_HELP, stageNodeFlags } from './stage-node-flags';
import { RUN_COMMAND_DEFAULTS } from '../job/defaults';
import type { RunSetup } from './run-once';
import { REFERENCE_FLAG } from './reference-flag';
import { TRACE_OUTPUT_FLAGS } from './trace-output';
import { readKeyFile } from './key-file';
import { warmupFlag, withWarmup } from './warmup-flag';
import { REPORT_FLAG } from './report/report-flag';
import { DISCOVER, parseRequirements } from '../job/node-require';

export const RUN_FLAGS: readonly FlagSpec[] = [
  ...JOB_FLAGS,
  ...SWAP_FLAGS,
  JOB_KEY_FILE_FLAG,
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
    help: `NATS server(s): ${NATS_URL_FORMS} (default: BATON_NATS_URL or NATS_URL from the environment, else start a local nats-server on a free loopback port)`,
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
    help: `use running node agents (baton node) instead of spawning them; stages are dealt in contiguous blocks. ${DISCOVER}: the agents that answer as the NATS service baton-node and meet --require (the fastest, when more than the stages)`,
  },
  {
    name: 'require',
    type: 'list',
    metavar: 'K=V,…',
    help: `with --nodes ${DISCOVER}: use only nodes with these tags (gpu=h200) or backend=NAME`,
  },
  {
    name: 'node-key-file',
    type: 'string',
    metavar: 'FILE',
    help: 'with --nodes: the key file those agents were started with (baton node --key-file); every message is sealed under it',
  },
  {
    name: 'compare',
    type: 'list',
    metavar: 'P1,P2,…',
    help: 'run the same seed under each policy and compare (speedup over the first); the k-th policy (from 0) runs as job <job>-k, so tap --job <job>-k watches it',
  },
  REFERENCE_FLAG,
  ...TRACE_OUTPUT_FLAGS,
  warmupFlag(RUN_COMMAND_DEFAULTS.warmupIterations),
  REPORT_FLAG,
  {
    name: 'stall-timeout',
    type: 'int',
    metavar: 'MS',
    help: 'fail the job after this long without progress (at most 2147483647, the longest timer Node keeps); a stage process that sends no heartbeat for 2 s (or this, when shorter) is dead or stopped',
    default: RUN_COMMAND_DEFAULTS.stallTimeoutMs,
  },
  { name: 'json', type: 'bool', help: 'print JSON instead of a table' },
  CONFIG_FLAG,
  PRINT_CONFIG_FLAG,
  HELP_FLAG,
];

export const RUN_HELP =
  helpText(
    'run',
    'run a pipeline job on the real clock, over NATS (default) or in one process',
    'baton run [sim flags] [--transport nats|local] [--nats URL] [--processes per-stage|single] [--nodes N1,…] [--trace FILE.json] [--gantt FILE.svg] [--report FILE.html] [--config FILE] [--json]',
    RUN_FLAGS,
  ) + STAGE_NODE_FLAGS_HELP;

/** Stage processes `run --processes per-stage` starts on this machine, at most (about 60 MB each). */
export const MAX_LOCAL_STAGE_PROCESSES = 64;

/**
 * Refuses, before a nats-server or a stage process starts, stage processes on this machine
 * that could not start: more than MAX_LOCAL_STAGE_PROCESSES, or BATON_STAGE_NODE_FLAGS that are not flags.
 */
export function checkLocalProcesses(cfg: JobConfig, setup: RunSetup, command: string): void {
  if (setup.transport === 'nats' && (setup.processes === 'per-stage' || setup.nodes) && (cfg.tp > 1 || cfg.dp > 1))
    throw new UsageError(
      `${command}: --tp ${cfg.tp} --dp ${cfg.dp} over NATS runs every rank's actors in this process (--processes single); node agents and --processes per-stage host whole stages of one rank only`,
    );
  if (setup.transport !== 'nats' || setup.processes !== 'per-stage' || setup.nodes) return;
  if (cfg.stages > MAX_LOCAL_STAGE_PROCESSES)
    throw new UsageError(
      `${command}: --processes per-stage starts ${cfg.stages} stage processes on this machine (about 60 MB each); at most ${MAX_LOCAL_STAGE_PROCESSES}: use --processes single${command === 'run' ? ', or --nodes to spread them' : ''}`,
    );
  stageNodeFlags();
}

/** The job config and the run setup `baton run`'s flags give, every combination checked. */
export function runConfigFromFlags(
  flags: ParsedFlags,
  given: ReadonlySet<string>,
): { cfg: JobConfig; setup: RunSetup } {
  const cfg = runJobConfig(flags, given);
  const setup: RunSetup = {
    transport: flags.transport as 'nats' | 'local',
    processes: flags.processes as 'per-stage' | 'single',
    natsUrl: natsUrlOf(flags.nats, 'run'),
    nodes: flags.nodes as string[] | undefined,
    ...(flags.require !== undefined ? { require: requirementsOf(flags.require as string[]) } : {}),
    ...(flags.nodeKeyFile !== undefined
      ? { nodeKey: readKeyFile(String(flags.nodeKeyFile), 'run: --node-key-file') }
      : {}),
    ...(flags.keyFile !== undefined ? { jobKey: readKeyFile(String(flags.keyFile), 'run: --key-file') } : {}),
    swaps: swapOptionsFromFlags(flags),
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
  if (setup.nodes) checkNodes(setup.nodes, setup.natsUrl, cfg.stages);
  if (setup.nodes && !setup.nodeKey)
    throw new UsageError(
      'run: --nodes needs --node-key-file FILE, the key file those node agents were started with (baton node --key-file)',
    );
  if (!setup.nodes && setup.nodeKey) throw new UsageError('run: --node-key-file goes with --nodes');
  if (setup.require && !(setup.nodes?.length === 1 && setup.nodes[0] === DISCOVER))
    throw new UsageError(`run: --require goes with --nodes ${DISCOVER}`);
  if (setup.jobKey && (setup.nodes || setup.transport === 'local'))
    throw new UsageError(
      'run: --key-file seals a job over NATS whose stages this launcher starts; with --nodes the key is --node-key-file, and --transport local seals nothing',
    );
  checkLocalProcesses(cfg, setup, 'run');
  return { cfg, setup };
}

/** The job flags with run's stall timeout and warm-up iterations (none in asynchronous mode). */
function runJobConfig(flags: ParsedFlags, given: ReadonlySet<string>): JobConfig {
  const cfg: JobConfig = withWarmup(
    asyncStream({ ...jobConfigFromFlags(flags), stallTimeoutMs: flags.stallTimeout as number }),
    flags,
    given,
    'run',
  );
  if (!(cfg.stallTimeoutMs > 0 && cfg.stallTimeoutMs <= MAX_TIMER_MS))
    throw new UsageError(
      `run: --stall-timeout must be between 1 and ${MAX_TIMER_MS} ms (the longest timer Node keeps), got ${cfg.stallTimeoutMs}`,
    );
  return cfg;
}

/** --nodes: valid distinct agent names on a server given with --nats, no more than the stages. */
function checkNodes(nodes: readonly string[], natsUrl: string | undefined, stages: number): void {
  if (nodes.includes(DISCOVER) && nodes.length > 1)
    throw new UsageError(`run: --nodes ${DISCOVER} finds the nodes itself; it takes no names beside it`);
  for (const n of nodes) {
    if (!NODE_NAME_RE.test(n))
      throw new UsageError(
        `run: --nodes: node names match [A-Za-z0-9_-]+ (as baton node --name), got ${JSON.stringify(n)}`,
      );
    if (n.length > MAX_NODE_NAME)
      throw new UsageError(
        `run: --nodes: a node name is at most ${MAX_NODE_NAME} characters (as baton node --name), got one of ${n.length}`,
      );
  }
  if (new Set(nodes).size !== nodes.length) throw new UsageError(`run: --nodes names a node twice: ${nodes.join(',')}`);
  if (!natsUrl)
    throw new UsageError(
      'run: --nodes needs --nats URL, the server those node agents joined (without it the run starts a private server no agent knows)',
    );
  if (nodes.length > stages)
    throw new UsageError(
      `run: --nodes names ${nodes.length} agents for ${stages} stages; each agent hosts at least one stage, so ${nodes.slice(stages).join(',')} would get none`,
    );
}

function requirementsOf(pairs: readonly string[]): Record<string, string> {
  try {
    return parseRequirements(pairs, 'run: --require');
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}
