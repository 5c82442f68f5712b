// The flags of `baton run` and the checks of their combinations, and the limit on the stage
// processes one machine starts (which `baton train` checks too).

import { MAX_TIMER_MS } from '../base/clock';
import { JobConfig } from '../job/config';
import { CONFIG_FLAG, HELP_FLAG, PRINT_CONFIG_FLAG, FlagSpec, ParsedFlags, UsageError, helpText } from './args';
import { NATS_ACCESS_FLAGS, NATS_URL_FORMS, natsAccessOf, natsUrlOf } from './nats-flag';
import { JOB_FLAGS, asyncStream, jobConfigFromFlags, maxRestartsFlag, maxRestartsOf } from './job-flags';
import { JOB_KEY_FILE_FLAG, SWAP_FLAGS, swapOptionsFromFlags } from './swap-flags';
import { STAGE_NODE_FLAGS_HELP, stageNodeFlags } from './stage-node-flags';
import { HEARTBEAT_DEFAULTS, RUN_COMMAND_DEFAULTS } from '../job/defaults';
import type { RunSetup } from './run-once';
import { REFERENCE_FLAGS } from './reference-flag';
import { TRACE_OUTPUT_FLAGS } from './trace-output';
import { readKeyFile } from './key-file';
import { AGENT_FLAGS, agentSetupOf } from './agent-flags';
import { warmupFlag, withWarmup } from './warmup-flag';
import { REPORT_FLAG } from './report/report-flag';

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
  ...NATS_ACCESS_FLAGS,
  {
    name: 'processes',
    type: 'string',
    help: 'per-stage: one OS process per stage; single: all stages in this process',
    choices: ['per-stage', 'single'],
    default: RUN_COMMAND_DEFAULTS.processes,
  },
  ...AGENT_FLAGS,
  {
    name: 'compare',
    type: 'list',
    metavar: 'P1,P2,…',
    help: 'run the same seed under each policy and compare (speedup over the first); the k-th policy (from 0) runs as job <job>-k, so tap --job <job>-k watches it',
  },
  ...REFERENCE_FLAGS,
  ...TRACE_OUTPUT_FLAGS,
  warmupFlag(RUN_COMMAND_DEFAULTS.warmupIterations),
  REPORT_FLAG,
  {
    name: 'stall-timeout',
    type: 'int',
    metavar: 'MS',
    help: `fail the job after this long without progress (at most 2147483647, the longest timer Node keeps); a stage process that sends no heartbeat for ${HEARTBEAT_DEFAULTS.timeoutMs / 1000} s (or this, when shorter) is dead or stopped`,
    default: RUN_COMMAND_DEFAULTS.stallTimeoutMs,
  },
  maxRestartsFlag(RUN_COMMAND_DEFAULTS.maxRestarts),
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
  if (setup.transport !== 'nats' || setup.processes !== 'per-stage' || setup.nodes) return;
  const processes = cfg.stages * cfg.tp * cfg.dp;
  const what = cfg.tp > 1 || cfg.dp > 1 ? `one per stage of each rank and replica, ${processes}` : `${processes}`;
  if (processes > MAX_LOCAL_STAGE_PROCESSES)
    throw new UsageError(
      `${command}: --processes per-stage starts ${what} stage processes on this machine (about 60 MB each); at most ${MAX_LOCAL_STAGE_PROCESSES}: use --processes single${command === 'run' ? ', or --nodes to spread them' : ''}`,
    );
  stageNodeFlags();
}

/** The job config and the run setup `baton run`'s flags give, every combination checked. */
export function runConfigFromFlags(
  flags: ParsedFlags,
  given: ReadonlySet<string>,
): { cfg: JobConfig; setup: RunSetup } {
  const cfg = runJobConfig(flags, given);
  const transport = flags.transport as 'nats' | 'local';
  const processes = flags.processes as 'per-stage' | 'single';
  const natsUrl = natsUrlOf(flags.nats, 'run');
  const jobKey = flags.keyFile !== undefined ? readKeyFile(String(flags.keyFile), 'run: --key-file') : undefined;
  const setup: RunSetup = {
    transport,
    processes,
    natsUrl,
    natsAccess: natsAccessOf(flags, 'run', transport === 'nats' ? natsUrl : undefined),
    maxRestarts: maxRestartsOf(flags.maxRestarts, 'run'),
    ...agentSetupOf(flags, 'run', {
      transport,
      processes,
      natsUrl,
      shape: { stages: cfg.stages, tp: cfg.tp, dp: cfg.dp },
      jobKey: !!jobKey,
    }),
    ...(jobKey ? { jobKey } : {}),
    swaps: swapOptionsFromFlags(flags),
    onServer: ({ url, job, tapUrlFile }) =>
      process.stderr.write(
        `run: job ${job} on a nats-server of its own at ${url} (every client logs in); watch it with BATON_NATS_URL=$(cat ${tapUrlFile}) baton tap --job ${job}\n`,
      ),
  };
  if (setup.transport === 'local' && setup.natsUrl)
    throw new UsageError('run: --nats and --nodes need --transport nats');
  if (setup.transport === 'local' && given.has('processes'))
    throw new UsageError('run: --transport local runs every stage in this process; --processes needs --transport nats');
  if (setup.jobKey && setup.transport === 'local')
    throw new UsageError('run: --key-file seals a job over NATS; --transport local seals nothing');
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
