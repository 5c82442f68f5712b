// The flags of `baton train` and its help text.

import { BACKWARD_MODES, CONSISTENCY_POLICIES } from '../actors/param-store';
import {
  ASYNC_DEFAULTS,
  HEARTBEAT_DEFAULTS,
  JOB_DEFAULTS,
  TRAIN_COMMAND_DEFAULTS,
  TRAIN_DEFAULTS,
} from '../job/defaults';
import { MAX_VAL_BATCHES } from '../models/train-config';
import { CONFIG_FLAG, HELP_FLAG, PRINT_CONFIG_FLAG, FlagSpec, helpText } from './args';
import { NATS_ACCESS_FLAGS, NATS_URL_FORMS } from './nats-flag';
import { BUFFER_LIMIT_FLAG, INJECT_FAULTS_FLAG, RANK_JITTER_FLAG, maxRestartsFlag } from './job-flags';
import { STAGE_NODE_FLAGS_HELP } from './stage-node-flags';
import { PLACEMENT_FLAGS } from './placement-flags';
import { AGENT_FLAGS } from './agent-flags';
import { JOB_KEY_FILE_FLAG, SWAP_FLAGS } from './swap-flags';
import { TRAIN_OUTPUT_FLAGS } from './train-outputs';

export const TRAIN_FLAGS: readonly FlagSpec[] = [
  ...SWAP_FLAGS,
  JOB_KEY_FILE_FLAG,
  { name: 'model', type: 'string', help: 'model', choices: ['gpt', 'mlp'], default: TRAIN_DEFAULTS.model },
  {
    name: 'data',
    type: 'string',
    metavar: 'FILE',
    help: 'text file to train on (default: a synthetic corpus the runtime makes)',
  },
  { name: 'stages', type: 'int', metavar: 'P', help: 'pipeline stages', default: TRAIN_COMMAND_DEFAULTS.stages },
  { name: 'chunks', type: 'int', metavar: 'V', help: 'model chunks per stage', default: TRAIN_COMMAND_DEFAULTS.chunks },
  { name: 'tp', type: 'int', metavar: 'T', help: 'tensor-parallel ranks per stage', default: JOB_DEFAULTS.tp },
  { name: 'dp', type: 'int', metavar: 'D', help: 'data-parallel replicas (sync mode only)', default: JOB_DEFAULTS.dp },
  {
    name: 'microbatches',
    type: 'int',
    metavar: 'M',
    help: 'microbatches per iteration',
    default: TRAIN_COMMAND_DEFAULTS.microbatches,
  },
  {
    name: 'microbatch-size',
    type: 'int',
    metavar: 'B',
    help: 'sequences (gpt) or windows (mlp) per microbatch',
    default: TRAIN_DEFAULTS.microbatchSize,
  },
  { name: 'seq', type: 'int', metavar: 'S', help: 'context length (gpt) or window (mlp)', default: TRAIN_DEFAULTS.seq },
  { name: 'layers', type: 'int', metavar: 'L', help: 'blocks', default: TRAIN_DEFAULTS.layers },
  { name: 'width', type: 'int', metavar: 'D', help: 'residual width', default: TRAIN_DEFAULTS.width },
  { name: 'heads', type: 'int', metavar: 'H', help: 'attention heads (gpt)', default: TRAIN_DEFAULTS.heads },
  {
    name: 'lr',
    type: 'number',
    metavar: 'LR',
    help: 'peak learning rate (AdamW, warmup then cosine to 0.1x)',
    default: TRAIN_DEFAULTS.lr,
  },
  {
    name: 'warmup',
    type: 'int',
    metavar: 'N',
    help: 'warmup iterations (async: N x M updates)',
    default: TRAIN_DEFAULTS.warmup,
  },
  {
    name: 'iterations',
    type: 'int',
    metavar: 'N',
    help: 'iterations of the whole run (sync: one optimizer step each; async: M updates each)',
    default: TRAIN_COMMAND_DEFAULTS.iterations,
  },
  {
    name: 'policy',
    type: 'string',
    metavar: 'NAME',
    help: 'hint order or schedule (as for sim)',
    default: TRAIN_COMMAND_DEFAULTS.policy,
  },
  BUFFER_LIMIT_FLAG,
  {
    name: 'transport',
    type: 'string',
    help: 'message bus',
    choices: ['local', 'nats'],
    default: TRAIN_COMMAND_DEFAULTS.transport,
  },
  {
    name: 'nats',
    type: 'string',
    metavar: 'URL',
    help: `with --transport nats, the NATS server(s): ${NATS_URL_FORMS} (default: BATON_NATS_URL or NATS_URL from the environment, else start a local nats-server on a free loopback port)`,
  },
  ...NATS_ACCESS_FLAGS,
  {
    name: 'processes',
    type: 'string',
    help: 'with --transport nats: per-stage, one OS process per stage; single, all stages in this process',
    choices: ['per-stage', 'single'],
    default: TRAIN_COMMAND_DEFAULTS.processes,
  },
  {
    name: 'jitter',
    type: 'string',
    help: 'communication jitter injected by the senders',
    choices: ['none', 'paper'],
    default: TRAIN_COMMAND_DEFAULTS.jitter,
  },
  RANK_JITTER_FLAG,
  {
    name: 'jitter-seed',
    type: 'int',
    metavar: 'S',
    help: 'seed of the realized message delays only',
    default: TRAIN_COMMAND_DEFAULTS.jitterSeed,
  },
  { name: 'seed', type: 'int', metavar: 'S', help: 'seed of the model and the data', default: TRAIN_DEFAULTS.seed },
  {
    name: 'backend',
    type: 'string',
    metavar: 'NAME',
    help: 'force a tfjs backend: tfjs-node-gpu, tfjs-node, wasm, cpu (or env BATON_BACKEND)',
  },
  {
    name: 'threads',
    type: 'int',
    metavar: 'N',
    help: 'native-kernel (BLAS) threads of each compute process (or env BATON_THREADS; default: the cores, shared evenly by the stage processes this command starts)',
  },
  {
    name: 'checkpoint',
    type: 'string',
    metavar: 'DIR',
    help: 'save a checkpoint here at the end (and every --checkpoint-every iterations)',
  },
  {
    name: 'checkpoint-every',
    type: 'int',
    metavar: 'N',
    help: 'iterations between checkpoints (0 = only at the end)',
    default: TRAIN_DEFAULTS.checkpointEvery,
  },
  { name: 'resume', type: 'bool', help: 'continue from the checkpoint in --checkpoint DIR' },
  {
    name: 'val-batches',
    type: 'int',
    metavar: 'N',
    help: `validation microbatches evaluated at the end (at most ${MAX_VAL_BATCHES})`,
    default: TRAIN_DEFAULTS.valBatches,
  },
  { name: 'job', type: 'string', metavar: 'NAME', help: 'job name', default: TRAIN_COMMAND_DEFAULTS.job },
  {
    name: 'mode',
    type: 'string',
    help: 'sync: AdamW step after all M (a flush); async: NAdamW update after every backward, no flush',
    choices: ['sync', 'async'],
    default: TRAIN_COMMAND_DEFAULTS.mode,
  },
  {
    name: 'consistency',
    type: 'string',
    help: "async: how in-flight microbatches are kept consistent, by the FRESCO paper's names (none, pipemare, predict: the old names of inconsistent, recovery, pipeoptim; projection-control: FRESCO's projection against finished microbatches, the P=1 control)",
    choices: CONSISTENCY_POLICIES,
    default: TRAIN_COMMAND_DEFAULTS.consistency,
  },
  {
    name: 'lrd',
    type: 'bool',
    help: "async: PipeMare's learning-rate damping for any method, lr x delay^-p (p from 1 to 0 over the first 3/4 of the updates); off, as in FRESCO's comparison",
  },
  {
    name: 'backward',
    type: 'string',
    help: "async: kept = the backward runs on its forward's activations (the tape kept from F to B) at the weights the policy gives it; recompute = it recomputes its forward at those weights",
    choices: BACKWARD_MODES,
    default: ASYNC_DEFAULTS.backward,
  },
  {
    name: 'control-stages',
    type: 'int',
    metavar: 'P',
    help: "async projection-control: the depth whose FRESCO projection (each layer's tau) it applies",
    default: ASYNC_DEFAULTS.controlStages,
  },
  {
    name: 'alpha',
    type: 'number',
    metavar: 'A',
    help: "async fresco: protected fraction of each linear layer's capacity",
    default: ASYNC_DEFAULTS.alpha,
  },
  {
    name: 'pipemare-damping',
    type: 'bool',
    help: 'async pipemare/recovery: the same as --lrd (kept for the old name)',
  },
  { name: 'beta1', type: 'number', metavar: 'B1', help: 'async: NAdamW beta1', default: ASYNC_DEFAULTS.beta1 },
  {
    name: 'snapshot-every',
    type: 'int',
    metavar: 'N',
    help: 'async over NATS with --max-restarts: each stage sends the launcher its state every N updates (12 bytes a parameter), and a lost stage resumes from it, losing the updates since (0: no snapshots, a loss ends the job)',
    default: ASYNC_DEFAULTS.snapshotEvery,
  },
  {
    name: 'clock',
    type: 'string',
    help: "real: wall clock; virtual: real compute, but each task holds its stage for the profile's duration on a virtual clock (deterministic order)",
    choices: ['real', 'virtual'],
    default: TRAIN_COMMAND_DEFAULTS.clock,
  },
  {
    name: 'profile',
    type: 'string',
    metavar: 'NAME|FILE',
    help: 'message timing (and task durations with --clock virtual)',
    default: TRAIN_COMMAND_DEFAULTS.profile,
  },
  ...PLACEMENT_FLAGS,
  ...AGENT_FLAGS,
  CONFIG_FLAG,
  ...TRAIN_OUTPUT_FLAGS,
  PRINT_CONFIG_FLAG,
  INJECT_FAULTS_FLAG,
  {
    name: 'stall-timeout',
    type: 'int',
    metavar: 'MS',
    help: `fail the job after this long without progress; a stage process that sends no heartbeat for ${HEARTBEAT_DEFAULTS.timeoutMs / 1000} s (or this, when shorter) is dead or stopped, one inside a long task beats as busy`,
    default: TRAIN_COMMAND_DEFAULTS.stallTimeoutMs,
  },
  maxRestartsFlag(TRAIN_COMMAND_DEFAULTS.maxRestarts),
  {
    name: 'state-every',
    type: 'int',
    metavar: 'N',
    help: "sync with --max-restarts: each stage sends the launcher its state every N flushes (12 bytes a parameter), and a replay starts from the newest one every stage sent, replaying up to N iterations (0: no states, a replay starts from the job's start; async: --snapshot-every)",
    default: TRAIN_COMMAND_DEFAULTS.stateEvery,
  },
  { name: 'json', type: 'bool', help: 'print one JSON object (progress still goes to stderr; --quiet silences it)' },
  HELP_FLAG,
];

export const TRAIN_HELP =
  helpText(
    'train',
    'train a model with a pipeline, synchronous or asynchronous (real compute, TensorFlow.js)',
    'baton train [--model gpt|mlp] [--data FILE] [--stages P] [--chunks V] [--microbatches M] [--microbatch-size B] [--seq S] [--layers L] ' +
      '[--width D] [--iterations N] [--policy NAME] [--transport local|nats] [--nats URL] [--nodes N1,… --node-key-file FILE] [--jitter none|paper] [--checkpoint DIR] [--seed S] [--jitter-seed S] ' +
      '[--mode sync|async] [--consistency inconsistent|stash|recovery|spectrain|pipeoptim|lwp|fresco|projection-control] ' +
      '[--alpha A] [--lrd] [--backward kept|recompute] [--threads N] [--trace FILE.json] [--gantt FILE.svg] [--metrics FILE.jsonl] [--plot FILE.svg] [--report FILE.html] [--quiet] [--config FILE] [--json]',
    TRAIN_FLAGS,
  ) +
  STAGE_NODE_FLAGS_HELP +
  "  BATON_KERNELS                auto (default): native kernels when the addon is built; native: refuse to run without them; sgemm: only the matrix kernels and sums (no fused ops); tfjs: tfjs's own kernels\n" +
  '  BATON_THREADS                native-kernel threads of a compute process (what --threads sets for the processes it starts)\n';
