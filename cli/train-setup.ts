// What `baton train`'s flags give: the job config with its training and asynchronous
// settings, and the run setup (bus, processes, clock), every value and combination
// checked before anything starts.

import { resolveConfig, JobConfig } from '../job/config';
import { CheckpointMeta, hasCheckpoint, checkResumable, readCheckpointMeta } from '../job/checkpoint';
import { BackwardMode, ConsistencyName, pipemareHorizon } from '../actors/param-store';
import { ASYNC_DEFAULTS, TRAIN_DEFAULTS } from '../job/defaults';
import { MAX_VAL_BATCHES, TrainConfig, uniformStageFlops } from '../models/train-config';
import type { RankJitter } from '../models/lane-durations';
import { ParsedFlags, UsageError } from './args';
import { SwapOptions } from '../job/policy-control';
import { swapOptionsFromFlags } from './swap-flags';
import { readKeyFile } from './key-file';
import { ResolvedAccess, natsAccessOf, natsUrlOf } from './nats-flag';
import type { RunSetup } from './run-once';
import { bufferLimitFromFlag, faultsFromFlag, maxRestartsOf } from './job-flags';
import { checkLocalProcesses } from './run-flags';
import { AgentSetup, agentSetupOf } from './agent-flags';
import { checkOutputDir } from './output-paths';
import { parseThreads } from '../models/threads';
import { placedConfig } from './placement-flags';
import { MAX_TIMER_MS } from '../base/clock';

export interface TrainSetup extends AgentSetup {
  transport: 'local' | 'nats';
  processes: 'per-stage' | 'single';
  natsUrl?: string;
  /** TLS and credentials files for natsUrl (--tls-ca, --creds, …). */
  natsAccess?: ResolvedAccess;
  /** virtual: local bus, real compute timed by the profile on the virtual clock. */
  clock?: 'real' | 'virtual';
  /** Native-kernel threads of each compute process (undefined: env BATON_THREADS, else cores / processes). */
  threads?: number;
  /** Scripted swaps and the modules swaps may load (--swap-at, --swap-modules). */
  swaps?: SwapOptions;
  /** The job's key from --key-file (over NATS). */
  jobKey?: Uint8Array;
  /** Lost stage processes survived by replaying the iteration (--max-restarts). */
  maxRestarts?: number;
  /** Sync recovery: flushes between the states each stage sends (--state-every). */
  stateEvery?: number;
  /** Told about the nats-server a run without natsUrl starts (RunSetup.onServer). */
  onServer?: RunSetup['onServer'];
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
  const { start, meta } = resumePoint(flags, total);
  const train = trainConfigOf(flags, start, total);
  const mode = flags.mode as 'sync' | 'async';
  const M = positive(flags.microbatches, 'microbatches');
  checkModeFlags(flags, train, mode);
  const cfg = placedConfig(flags, jobConfigOf(flags, train, mode, M, start, total), () =>
    uniformStageFlops(train, flags.stages as number, flags.chunks as number),
  );
  if (meta)
    checkResumable(String(flags.checkpoint), meta, {
      stages: cfg.stages,
      chunks: cfg.chunks,
      microbatches: cfg.microbatches,
      train,
    });
  const setup = setupOf(flags, cfg);
  // Last: it creates the directory, which a refusal above should not leave behind. A
  // resumed run writes its checkpoints there too, so it must be writable as well.
  const madeDirs = flags.checkpoint ? checkOutputDir(String(flags.checkpoint), 'train: --checkpoint') : [];
  return { cfg, setup, madeDirs };
}

/** The iteration a run starts at: 0, or with --resume the checkpoint's next one. */
function resumePoint(flags: Record<string, unknown>, total: number): { start: number; meta: CheckpointMeta | null } {
  if (!flags.resume) return { start: 0, meta: null };
  if (!flags.checkpoint) throw new UsageError('train: --resume needs --checkpoint DIR');
  const meta = readCheckpointMeta(String(flags.checkpoint));
  const start = meta.nextIteration;
  if (start >= total)
    throw new UsageError(`train: the checkpoint is at iteration ${start}, nothing left of --iterations ${total}`);
  return { start, meta };
}

/** The model, data and optimizer flags. */
function trainConfigOf(flags: Record<string, unknown>, start: number, total: number): TrainConfig {
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
    ['snapshot-every', flags.snapshotEvery],
    ['state-every', flags.stateEvery],
  ] as const)
    if (!Number.isInteger(v) || (v as number) < 0)
      throw new UsageError(`train: --${name} must be an integer >= 0, got ${v}`);
  return train;
}

/** Checkpoints only in synchronous mode; the asynchronous parameter stores' alpha, beta1 and damping. */
function checkModeFlags(flags: Record<string, unknown>, train: TrainConfig, mode: 'sync' | 'async'): void {
  if (mode === 'async' && (flags.checkpoint || flags.resume))
    throw new UsageError('train: checkpoints are only written in synchronous mode');
  if (train.checkpointEvery > 0 && !flags.checkpoint)
    throw new UsageError('train: --checkpoint-every needs --checkpoint DIR');
  const alpha = flags.alpha as number;
  if (!(alpha > 0 && alpha <= 1)) throw new UsageError(`train: --alpha must be in (0, 1], got ${alpha}`);
  const beta1 = flags.beta1 as number;
  if (!(beta1 >= 0 && beta1 < 1)) throw new UsageError(`train: --beta1 must be in [0, 1), got ${beta1}`);
  const recovery = flags.consistency === 'pipemare' || flags.consistency === 'recovery';
  if (flags.pipemareDamping && !(mode === 'async' && recovery))
    throw new UsageError(
      'train: --pipemare-damping needs --mode async --consistency pipemare (or recovery, its new name)',
    );
}

function jobConfigOf(
  flags: Record<string, unknown>,
  train: TrainConfig,
  mode: 'sync' | 'async',
  M: number,
  start: number,
  total: number,
): JobConfig {
  return resolveConfig({
    job: String(flags.job),
    stages: positive(flags.stages, 'stages'),
    chunks: positive(flags.chunks, 'chunks'),
    tp: positive(flags.tp, 'tp'),
    dp: positive(flags.dp, 'dp'),
    microbatches: mode === 'async' ? M * total : M,
    policy: String(flags.policy),
    profile: String(flags.profile),
    jitter: flags.jitter as 'none' | 'paper',
    rankJitter: flags.rankJitter as RankJitter,
    seed: flags.jitterSeed as number,
    iterations: mode === 'async' ? 1 : total - start,
    bufferLimit: bufferLimitFromFlag(flags.bufferLimit),
    firstIteration: start,
    train,
    stallTimeoutMs: stallTimeoutOf(flags.stallTimeout),
    mode,
    faults: faultsFromFlag(flags.injectFaults, flags.jitterSeed as number),
    // Asynchronous mode updates after every microbatch: the schedule counts updates.
    async: {
      ...ASYNC_DEFAULTS,
      consistency: flags.consistency as ConsistencyName,
      alpha: flags.alpha as number,
      lr: train.lr,
      warmup: M * train.warmup,
      totalUpdates: M * total,
      weightDecay: train.weightDecay,
      beta1: flags.beta1 as number,
      pipemareDamping: flags.pipemareDamping === true,
      pipemareSteps: pipemareHorizon(M * total),
      lrd: flags.lrd === true,
      backward: flags.backward as BackwardMode,
      controlStages: positive(flags.controlStages, 'control-stages'),
      snapshotEvery: flags.snapshotEvery as number,
    },
  });
}

/** Each physical stage's forward FLOPs under a uniform partition of the model (real compute's work). */
function stallTimeoutOf(v: unknown): number {
  if (!(Number.isInteger(v) && (v as number) > 0 && (v as number) <= MAX_TIMER_MS))
    throw new UsageError(
      `train: --stall-timeout must be between 1 and ${MAX_TIMER_MS} ms (the longest timer Node keeps), got ${String(v)}`,
    );
  return v as number;
}

/** The bus, processes and clock, checked against each other and against the checkpoint directory. */
function setupOf(flags: Record<string, unknown>, cfg: JobConfig): TrainSetup {
  if (flags.transport === 'local' && flags.nats) throw new UsageError('train: --nats needs --transport nats');
  if (flags.clock === 'virtual' && flags.transport === 'nats')
    throw new UsageError('train: --clock virtual runs in one process; it takes no --transport nats');
  const natsUrl = natsUrlOf(flags.nats, 'train');
  if (flags.keyFile !== undefined && flags.transport !== 'nats')
    throw new UsageError('train: --key-file seals a job over NATS; it needs --transport nats');
  if (flags.checkpoint && !flags.resume && hasCheckpoint(String(flags.checkpoint)))
    throw new UsageError(
      `train: --checkpoint ${flags.checkpoint} already holds a checkpoint; add --resume to continue it, or give another directory (a new run would overwrite it)`,
    );
  const transport = flags.transport as 'local' | 'nats';
  const processes = flags.processes as 'per-stage' | 'single';
  const agents = agentSetupOf(flags, 'train', {
    transport,
    processes,
    natsUrl,
    shape: { stages: cfg.stages, tp: cfg.tp, dp: cfg.dp },
    jobKey: flags.keyFile !== undefined,
  });
  if (agents.nodes && flags.clock === 'virtual')
    throw new UsageError('train: --clock virtual runs in one process; it takes no --nodes');
  checkLocalProcesses(cfg, { transport, processes, ...agents }, 'train');
  return {
    transport,
    processes,
    natsUrl,
    natsAccess: natsAccessOf(flags as ParsedFlags, 'train', transport === 'nats' ? natsUrl : undefined),
    ...agents,
    clock: flags.clock as 'real' | 'virtual',
    threads: flags.threads === undefined ? undefined : parseThreads(flags.threads, 'train: --threads'),
    swaps: swapOptionsFromFlags(flags as ParsedFlags),
    maxRestarts: maxRestartsOf(flags.maxRestarts, 'train'),
    stateEvery: flags.stateEvery as number,
    ...(flags.keyFile !== undefined ? { jobKey: readKeyFile(String(flags.keyFile), 'train: --key-file') } : {}),
  };
}
