// `baton train`: pipeline training with real compute (TensorFlow.js), synchronous or asynchronous.
// The stages train their slices of the model on tensors that travel in the messages;
// this launcher collects losses, the final parameters (for the checksum and the
// validation loss) and writes checkpoints from the stages' reports.

import { resolveConfig, JobConfig } from '../job/config';
import { IterationRecord } from '../actors/coordinator';
import {
  CheckpointError,
  CheckpointMeta,
  checkFiles,
  hasCheckpoint,
  checkResumable,
  corpusDigest,
  readCheckpointMeta,
  writeCheckpoint,
} from '../job/checkpoint';
import { runJob, summarize } from '../job/run-local';
import { CONSISTENCY_POLICIES, ConsistencyName, pipemareHorizon } from '../actors/param-store';
import { ASYNC_DEFAULTS } from '../job/defaults';
import { StageSnapshot } from '../compute/training';
import { loadBackend } from '../models/backend';
import { paramChecksum, validationLoss } from '../models/reference-train';
import {
  MAX_VAL_BATCHES,
  TrainConfig,
  checkTrainSize,
  corpusFor,
  modelSpecFor,
  tokensPerMicrobatch,
} from '../models/train-config';
import { TRAIN_COMMAND_DEFAULTS, TRAIN_DEFAULTS } from '../job/defaults';
import { FlagSpec, UsageError, helpText, parseFlags } from './args';
import { NATS_URL_FORMS, natsFlag } from './nats-flag';
import { BUFFER_LIMIT_FLAG, bufferLimitFromFlag } from './job-flags';
import { warnRejects } from './rejects';
import { checkLocalProcesses, runOnce } from './run';
import { configForPrint } from './print-config';
import { STAGE_NODE_FLAGS_HELP } from './stage-node-flags';
import { checkOutputDir, removeMadeDirs } from './output-paths';

export const TRAIN_FLAGS: readonly FlagSpec[] = [
  { name: 'model', type: 'string', help: 'model', choices: ['gpt', 'mlp'], default: TRAIN_DEFAULTS.model },
  {
    name: 'data',
    type: 'string',
    metavar: 'FILE',
    help: 'text file to train on (default: a synthetic corpus the runtime makes)',
  },
  { name: 'stages', type: 'int', metavar: 'P', help: 'pipeline stages', default: TRAIN_COMMAND_DEFAULTS.stages },
  { name: 'chunks', type: 'int', metavar: 'V', help: 'model chunks per stage', default: TRAIN_COMMAND_DEFAULTS.chunks },
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
    help: `with --transport nats, the NATS server(s): ${NATS_URL_FORMS} (default: start a local nats-server on a free loopback port)`,
  },
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
    help: 'async: how in-flight microbatches are kept consistent',
    choices: CONSISTENCY_POLICIES,
    default: TRAIN_COMMAND_DEFAULTS.consistency,
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
    help: "async pipemare: also damp the learning rate by delay^-p (p from 1 to 0 over the first 3/4 of the updates); off, as in FRESCO's comparison",
  },
  { name: 'beta1', type: 'number', metavar: 'B1', help: 'async: NAdamW beta1', default: ASYNC_DEFAULTS.beta1 },
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
  { name: 'print-config', type: 'bool', help: 'print the resolved config and exit' },
  { name: 'json', type: 'bool', help: 'print one JSON object' },
  { name: 'help', type: 'bool', help: 'show this help' },
];

export const TRAIN_HELP =
  helpText(
    'train',
    'train a model with a pipeline, synchronous or asynchronous (real compute, TensorFlow.js)',
    'baton train [--model gpt|mlp] [--data FILE] [--stages P] [--chunks V] [--microbatches M] [--microbatch-size B] [--seq S] [--layers L] ' +
      '[--width D] [--iterations N] [--policy NAME] [--transport local|nats] [--jitter none|paper] [--checkpoint DIR] [--seed S] [--jitter-seed S] ' +
      '[--mode sync|async] [--consistency none|stash|pipemare|predict|fresco] [--alpha A] [--json]',
    TRAIN_FLAGS,
  ) + STAGE_NODE_FLAGS_HELP;

export interface TrainOutcome {
  backend: string;
  losses: number[];
  final_loss: number;
  val_loss: number;
  /** Training tokens per second of the iterations' makespans; null on the virtual clock, whose seconds are not time. */
  tokens_per_s: number | null;
  clock: 'real' | 'virtual';
  param_checksum: string;
  iterations_run: number;
  start_iteration: number;
  summary: ReturnType<typeof summarize> & { transport: string; processes: number; pids: number[] };
}

function positive(v: unknown, name: string): number {
  if (!Number.isInteger(v) || (v as number) < 1)
    throw new UsageError(`train: --${name} must be a positive integer, got ${v}`);
  return v as number;
}

export function trainConfigsFromFlags(flags: Record<string, unknown>): {
  cfg: JobConfig;
  setup: TrainSetup;
  madeDirs: string[];
} {
  const total = positive(flags.iterations, 'iterations');
  let start = 0;
  let meta: CheckpointMeta | null = null;
  if (flags.resume) {
    if (!flags.checkpoint) throw new UsageError('train: --resume needs --checkpoint DIR');
    meta = readCheckpointMeta(String(flags.checkpoint));
    start = meta.nextIteration;
    if (start >= total)
      throw new UsageError(`train: the checkpoint is at iteration ${start}, nothing left of --iterations ${total}`);
  }
  const train: TrainConfig = {
    ...TRAIN_DEFAULTS,
    model: flags.model as 'gpt' | 'mlp',
    data: (flags.data as string | undefined) ?? null,
    microbatchSize: positive(flags.microbatchSize, 'microbatch-size'),
    seq: positive(flags.seq, 'seq'),
    layers: positive(flags.layers, 'layers'),
    width: positive(flags.width, 'width'),
    heads: positive(flags.heads, 'heads'),
    lr: flags.lr as number,
    warmup: flags.warmup as number,
    seed: flags.seed as number,
    backend: (flags.backend as string | undefined) ?? null,
    checkpoint: (flags.checkpoint as string | undefined) ?? null,
    checkpointEvery: flags.checkpointEvery as number,
    startIteration: start,
    totalIterations: total,
    valBatches: positive(flags.valBatches, 'val-batches'),
  };
  if (train.valBatches > MAX_VAL_BATCHES)
    throw new UsageError(`train: --val-batches must be at most ${MAX_VAL_BATCHES}, got ${train.valBatches}`);
  if (!(train.lr > 0)) throw new UsageError(`train: --lr must be positive, got ${train.lr}`);
  for (const [name, v] of [
    ['warmup', train.warmup],
    ['seed', train.seed],
    ['jitter-seed', flags.jitterSeed],
    ['checkpoint-every', train.checkpointEvery],
  ] as const)
    if (!Number.isInteger(v) || (v as number) < 0)
      throw new UsageError(`train: --${name} must be an integer >= 0, got ${v}`);
  const mode = flags.mode as 'sync' | 'async';
  const M = positive(flags.microbatches, 'microbatches');
  if (mode === 'async' && (flags.checkpoint || flags.resume))
    throw new UsageError('train: checkpoints are only written in synchronous mode');
  if (train.checkpointEvery > 0 && !flags.checkpoint)
    throw new UsageError('train: --checkpoint-every needs --checkpoint DIR');
  const alpha = flags.alpha as number;
  if (!(alpha > 0 && alpha <= 1)) throw new UsageError(`train: --alpha must be in (0, 1], got ${alpha}`);
  const beta1 = flags.beta1 as number;
  if (!(beta1 >= 0 && beta1 < 1)) throw new UsageError(`train: --beta1 must be in [0, 1), got ${beta1}`);
  if (flags.pipemareDamping && !(mode === 'async' && flags.consistency === 'pipemare'))
    throw new UsageError('train: --pipemare-damping needs --mode async --consistency pipemare');
  const cfg = resolveConfig({
    job: String(flags.job),
    stages: positive(flags.stages, 'stages'),
    chunks: positive(flags.chunks, 'chunks'),
    microbatches: mode === 'async' ? M * total : M,
    policy: String(flags.policy),
    profile: String(flags.profile),
    jitter: flags.jitter as 'none' | 'paper',
    seed: flags.jitterSeed as number,
    iterations: mode === 'async' ? 1 : total - start,
    bufferLimit: bufferLimitFromFlag(flags.bufferLimit),
    firstIteration: start,
    train,
    stallTimeoutMs: TRAIN_COMMAND_DEFAULTS.stallTimeoutMs,
    mode,
    // Asynchronous mode updates after every microbatch: the schedule counts updates.
    async: {
      ...ASYNC_DEFAULTS,
      consistency: flags.consistency as ConsistencyName,
      alpha,
      lr: train.lr,
      warmup: M * train.warmup,
      totalUpdates: M * total,
      weightDecay: train.weightDecay,
      beta1: flags.beta1 as number,
      pipemareDamping: flags.pipemareDamping === true,
      pipemareSteps: pipemareHorizon(M * total),
    },
  });
  if (meta)
    checkResumable(String(flags.checkpoint), meta, {
      stages: cfg.stages,
      chunks: cfg.chunks,
      microbatches: cfg.microbatches,
      train,
    });
  if (flags.transport === 'local' && flags.nats) throw new UsageError('train: --nats needs --transport nats');
  if (flags.clock === 'virtual' && flags.transport === 'nats')
    throw new UsageError('train: --clock virtual runs in one process; it takes no --transport nats');
  const natsUrl = flags.nats === undefined ? undefined : natsFlag(flags.nats, 'train');
  // Last: it creates the directory, which a refusal above should not leave behind. A
  // resumed run writes its checkpoints there too, so it must be writable as well.
  if (flags.checkpoint && !flags.resume && hasCheckpoint(String(flags.checkpoint)))
    throw new UsageError(
      `train: --checkpoint ${flags.checkpoint} already holds a checkpoint; add --resume to continue it, or give another directory (a new run would overwrite it)`,
    );
  checkLocalProcesses(
    cfg,
    { transport: flags.transport as 'local' | 'nats', processes: flags.processes as 'per-stage' | 'single' },
    'train',
  );
  const madeDirs = flags.checkpoint ? checkOutputDir(String(flags.checkpoint), 'train: --checkpoint') : [];
  return {
    cfg,
    setup: {
      transport: flags.transport as 'local' | 'nats',
      processes: flags.processes as 'per-stage' | 'single',
      natsUrl,
      clock: flags.clock as 'real' | 'virtual',
    },
    madeDirs,
  };
}

function snapshotsOf(rec: IterationRecord): StageSnapshot[] | null {
  const snaps = rec.reports.map((r) => r.snapshot as StageSnapshot | undefined);
  return snaps.every((s) => s) ? (snaps as StageSnapshot[]) : null;
}

export interface TrainSetup {
  transport: 'local' | 'nats';
  processes: 'per-stage' | 'single';
  natsUrl?: string;
  /** virtual: local bus, real compute timed by the profile on the virtual clock. */
  clock?: 'real' | 'virtual';
}

export async function train(
  cfg: JobConfig,
  setup: TrainSetup,
  progress?: (line: string) => void,
): Promise<TrainOutcome> {
  const t = cfg.train!;
  const backend = (await loadBackend({ force: t.backend ?? undefined })).backend;
  const corpus = corpusFor(t);
  corpus.checkFits(t.seq);
  const spec = modelSpecFor(t, corpus.vocabSize);
  checkTrainSize(t, spec);
  const corpusSha = corpusDigest(corpus.text);
  if (t.startIteration > 0 && t.checkpoint) {
    const meta = readCheckpointMeta(t.checkpoint);
    if (meta.backend !== undefined && meta.backend !== backend)
      throw new CheckpointError(
        `cannot resume ${JSON.stringify(t.checkpoint)}: it was saved by a run on the ${meta.backend} backend and this run would use ${backend}; backends round differently, so it would continue neither run (give --backend ${meta.backend})`,
      );
    checkFiles(t.checkpoint, meta, { corpus: corpusSha, checksumOf: (params) => paramChecksum(spec, params) });
  }
  const tokens = cfg.microbatches * tokensPerMicrobatch(t);
  let last: StageSnapshot[] | null = null;
  const onIteration = (rec: IterationRecord) => {
    const snaps = snapshotsOf(rec);
    if (snaps) {
      last = snaps;
      // A diverged run's parameters are not finite: the last good checkpoint stays.
      const finite = snaps.every((s) => Object.values(s.params).every((p) => p.every(Number.isFinite)));
      if (t.checkpoint && !finite) {
        const kept = hasCheckpoint(t.checkpoint)
          ? `${t.checkpoint} keeps the last one`
          : `and ${t.checkpoint} holds none (the parameters were never finite at a checkpoint)`;
        process.stderr.write(
          `baton train: iteration ${rec.iteration + 1}: the parameters are not finite (the run diverged); no checkpoint written, ${kept}\n`,
        );
      } else if (t.checkpoint) {
        const params = new Map(snaps.flatMap((s) => Object.entries(s.params)));
        writeCheckpoint(
          t.checkpoint,
          {
            nextIteration: rec.iteration + 1,
            stages: cfg.stages,
            chunks: cfg.chunks,
            checksum: paramChecksum(spec, params),
            corpus: corpusSha,
            backend,
            config: cfg,
          },
          snaps,
        );
      }
    }
    if (cfg.mode === 'sync') {
      const loss = rec.reports[cfg.stages - 1].loss as number;
      const pace =
        setup.clock === 'virtual'
          ? `makespan ${rec.makespan.toFixed(1)} ms (virtual clock)`
          : `${(tokens / (rec.makespan / 1000)).toFixed(0)} tokens/s`;
      progress?.(`iteration ${rec.iteration + 1}/${t.totalIterations}  loss ${loss.toFixed(4)}  ${pace}`);
    }
  };
  const o =
    setup.clock === 'virtual'
      ? {
          result: await runJob(cfg, { clock: 'virtual', onIteration }),
          transport: 'local',
          processes: 1,
          pids: [process.pid],
        }
      : await runOnce(cfg, { ...setup, onIteration });
  warnRejects('train', o.result);
  const records = o.result.records;
  const losses =
    cfg.mode === 'async'
      ? (records[0].reports[cfg.stages - 1].losses as number[])
      : records.map((r) => r.reports[cfg.stages - 1].loss as number);
  if (!last) throw new Error('the stages sent no final parameters');
  const params = new Map((last as StageSnapshot[]).flatMap((s) => Object.entries(s.params)));
  const seconds = records.reduce((a, r) => a + r.makespan, 0) / 1000;
  // Asynchronous runs report one loss per update: the final loss is the mean of the last 5%.
  const tail = cfg.mode === 'async' ? losses.slice(-Math.max(1, Math.ceil(losses.length / 20))) : losses.slice(-1);
  return {
    backend,
    losses,
    final_loss: tail.reduce((a, b) => a + b, 0) / tail.length,
    val_loss: validationLoss(t, params, t.valBatches),
    tokens_per_s: setup.clock === 'virtual' ? null : (tokens * records.length) / seconds,
    clock: setup.clock ?? 'real',
    param_checksum: paramChecksum(spec, params),
    iterations_run: records.length,
    start_iteration: t.startIteration,
    summary: { ...summarize(o.result), transport: o.transport, processes: o.processes, pids: o.pids },
  };
}

/** Where the checkpoint in `dir` stands (a diverged run leaves the last finite one). */
function savedAt(dir: string): string {
  try {
    return `(next iteration ${readCheckpointMeta(dir).nextIteration})`;
  } catch {
    return '(none written: the parameters were never finite)';
  }
}

export async function trainCommand(argv: readonly string[], out: (s: string) => void): Promise<number> {
  const { flags, given } = parseFlags(argv, TRAIN_FLAGS, 'train');
  if (flags.help) {
    out(TRAIN_HELP);
    return 0;
  }
  const asyncOnly = ['consistency', 'alpha', 'beta1'].filter((k) => given.has(k));
  if (flags.mode !== 'async' && asyncOnly.length > 0)
    throw new UsageError(
      `train: ${asyncOnly.map((k) => `--${k}`).join(', ')} set${asyncOnly.length === 1 ? 's' : ''} the asynchronous parameter stores; add --mode async`,
    );
  // As in `baton run`: without NATS every stage runs in this process, whatever --processes asks.
  if (flags.transport !== 'nats' && given.has('processes'))
    throw new UsageError(
      'train: --transport local runs every stage in this process; --processes needs --transport nats',
    );
  const { cfg, setup, madeDirs } = trainConfigsFromFlags(flags);
  if (flags.printConfig) {
    removeMadeDirs(madeDirs);
    out(configForPrint(cfg, { ...setup, clock: setup.clock ?? 'real' }));
    return 0;
  }
  const tty = !flags.json && process.stderr.isTTY;
  const progress = flags.json ? undefined : (line: string) => process.stderr.write(tty ? `\r${line}   ` : `${line}\n`);
  let r: TrainOutcome;
  try {
    r = await train(cfg, setup, progress);
  } catch (err) {
    // Refused (backend, corpus, model size) or failed before its first checkpoint: the directories made for it go.
    removeMadeDirs(madeDirs);
    throw err;
  }
  if (tty) process.stderr.write('\n');
  // A diverged run still reports what it did, then fails (JSON shows its non-finite losses as null).
  const diverged = (): number => {
    if (Number.isFinite(r.final_loss) && Number.isFinite(r.val_loss)) return 0;
    removeMadeDirs(madeDirs); // diverged before its first checkpoint: nothing was kept
    process.stderr.write(
      `baton train: the loss is not finite (final ${r.final_loss}, validation ${r.val_loss}): the run diverged; lower --lr or raise --warmup\n`,
    );
    return 1;
  };
  if (flags.json) {
    const { summary, ...rest } = r;
    // The job summary's seed is the jitter seed; the model's seed is --seed.
    out(JSON.stringify({ ...rest, ...summary, seed: cfg.train!.seed, jitter_seed: summary.seed }));
    return diverged();
  }
  out(
    `backend ${r.backend}; ${cfg.train!.model} on ${cfg.train!.data ?? 'the synthetic corpus'}; P=${cfg.stages} V=${cfg.chunks} ${cfg.mode === 'async' ? `M=${cfg.microbatches / cfg.train!.totalIterations} per iteration, ${cfg.microbatches} updates without a flush,` : `M=${cfg.microbatches}`} policy ${cfg.policy}, ${r.summary.transport} (${r.summary.processes} process${r.summary.processes > 1 ? 'es' : ''})`,
  );
  out(
    `final loss ${r.final_loss.toFixed(4)}, validation loss ${r.val_loss.toFixed(4)}, ${r.tokens_per_s === null ? 'no throughput on the virtual clock' : `${r.tokens_per_s.toFixed(0)} tokens/s`}`,
  );
  out(`param checksum ${r.param_checksum}`);
  if (cfg.train!.checkpoint) out(`checkpoint: ${cfg.train!.checkpoint} ${savedAt(cfg.train!.checkpoint)}`);
  return diverged();
}
