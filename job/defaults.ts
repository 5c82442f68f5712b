// Every default of Baton, defined once: the job config's, the training and asynchronous
// settings', the overrides of the run and train commands, and the benchmarks'. CLI flags
// read their defaults from here, and --print-config shows them resolved.

import type { AsyncSettings } from '../actors/param-store';
import type { TrainConfig } from '../models/train-config';
import type { JobConfig } from './config';

/** Asynchronous mode's parameter stores (FRESCO's setup, Appendix A of its paper). */
export const ASYNC_DEFAULTS: AsyncSettings = {
  consistency: 'none',
  alpha: 0.25,
  lr: 1e-3,
  warmup: 20,
  totalUpdates: 1000,
  weightDecay: 0.01,
  // FRESCO's sweep (its D.2) picks β1 = 0.99 over 0.9 for every method but SpecTrain.
  beta1: 0.99,
  clip: 1.0,
  pipemareDamping: false,
  pipemareSteps: 750,
  lrd: false,
  backward: 'kept',
  controlStages: 1,
  snapshotEvery: 16,
  firstMicrobatch: 0,
};

export const JOB_DEFAULTS: JobConfig = {
  job: 'baton',
  stages: 4,
  microbatches: 8,
  chunks: 1,
  // T tensor-parallel ranks per stage and D data-parallel replicas: one of each is a plain pipeline.
  tp: 1,
  dp: 1,
  policy: 'bf',
  profile: 'uniform',
  jitter: 'none',
  jitterScale: 1,
  // The ranks of a TP group sit on one node: their messages between stages share the link's delay.
  rankJitter: 'shared',
  // RRFP's Figure 5: iteration time stops improving from a limit of 16; the paper uses 32,
  // a conservative value inside that range, for all its experiments.
  bufferLimit: 32,
  seed: 0,
  iterations: 1,
  // sim and train run none; run (real clock, one process per stage) drops one: RUN_COMMAND_DEFAULTS.
  warmupIterations: 0,
  // A job with no progress for this long has failed (a stage process that stops beating, sooner: HEARTBEAT_DEFAULTS).
  stallTimeoutMs: 30000,
  firstIteration: 0,
  train: null,
  mode: 'sync',
  async: ASYNC_DEFAULTS,
  partition: 'speed',
  stageSpeeds: null,
  placement: null,
  faults: null,
};

/** Recovery of lost stage-to-stage messages (actors/resend.ts). */
export const RESEND_DEFAULTS = {
  /** A stage idle this long with work left asks its peers again for what it has not had, ms (real or virtual). */
  afterMs: 250,
} as const;

/** Placement (job/placement.ts): auto puts the heaviest stages on the fastest nodes. */
export const PLACEMENT_DEFAULTS = { placement: 'auto', partition: 'speed' } as const;

/** What a training job computes, unless told otherwise (a model small enough for the tests). */
export const TRAIN_DEFAULTS: TrainConfig = {
  model: 'gpt',
  data: null,
  microbatchSize: 8,
  seq: 64,
  layers: 4,
  width: 64,
  heads: 4,
  lr: 3e-3,
  warmup: 10,
  weightDecay: 0.01,
  seed: 1,
  backend: null,
  checkpoint: null,
  checkpointEvery: 0,
  startIteration: 0,
  totalIterations: 1,
  valBatches: 8,
};

/** `baton run`: where its defaults differ from the job's, and what only it has. */
export const RUN_COMMAND_DEFAULTS = {
  transport: 'nats',
  processes: 'per-stage',
  // The first iteration on the real clock pays for JIT compilation and new connections.
  warmupIterations: 1,
  stallTimeoutMs: JOB_DEFAULTS.stallTimeoutMs,
  // None: a run measures its pipeline, and a replay would be part of what it times (--max-restarts N to have them).
  maxRestarts: 0,
} as const;

/** `baton train`: where its defaults differ from the job's and the model's. */
export const TRAIN_COMMAND_DEFAULTS = {
  job: 'train',
  stages: 2,
  chunks: 1,
  microbatches: 4,
  iterations: 10,
  policy: JOB_DEFAULTS.policy,
  transport: 'local',
  processes: 'per-stage',
  jitter: 'none',
  jitterSeed: 0,
  mode: 'sync',
  consistency: ASYNC_DEFAULTS.consistency,
  clock: 'real',
  profile: 'train',
  // A training task can hold its stage for seconds (a large model on the wasm backend), and
  // a stage waiting for a peer's big message shows no progress meanwhile.
  stallTimeoutMs: 600000,
  // Lost stage processes a sync run over NATS survives (restarted, the iteration replayed); past them it fails.
  maxRestarts: 3,
  // Sync recovery: flushes between two states a stage sends the launcher. Each state holds
  // the stage for its copy, encoding and publishing (12 bytes a parameter: 0.2-0.3 s for the
  // 9.6 MB of a peer-bench stage); one every 8 flushes costs a few percent and bounds a
  // replay to 8 iterations (bench/README: the fault matrix and the peer bench).
  stateEvery: 8,
} as const;

/** `baton calibrate` (models/calibrate.ts): the reference sizes, about a second of measuring on wasm. */
export const CALIBRATE_DEFAULTS = {
  matmulSize: 256,
  // The reference stage: two blocks of the train bench's char-GPT (d 128, seq 64), 8 sequences.
  stageBlocks: 2,
  width: 128,
  seq: 64,
  batch: 8,
  budgetMs: 400,
} as const;

/** `baton tap`: the server it watches when neither --nats nor the environment names one. */
export const TAP_COMMAND_DEFAULTS = {
  nats: 'nats://127.0.0.1:4222',
} as const;

/** Hot swaps of a job's policy (`--swap-at`, `--swap-modules`, `baton policy`). */
/** `baton auth init`: the server URL written into the credential files; the job's chunks per stage (as run/train --chunks). */
export const AUTH_INIT_DEFAULTS = { server: 'nats://127.0.0.1:4222', chunks: 1 } as const;

export const SWAP_DEFAULTS = {
  /** No scripted swaps. */
  swapAt: '',
  /** No module paths a swap may load (built-in names need none). */
  swapModules: '',
  /** The NATS server `baton policy` and `baton inspect` talk to unless told. */
  natsUrl: 'nats://127.0.0.1:4222',
  /** How long `baton policy set` waits for every stage to adopt, and `get` for an answer. */
  policyWaitMs: 5000,
  /** How often a stage on the real clock publishes its stats (baton inspect), ms. */
  statsEveryMs: 250,
  /** How often `baton inspect` redraws a terminal, and prints its lines when stdout is not one, ms. */
  inspectRefreshMs: 250,
  inspectPlainMs: 1000,
} as const;

/** Heartbeats of node agent processes (job/heartbeat.ts) and the lease of a job on its agents. */
export const HEARTBEAT_DEFAULTS = {
  /** How often a process beats, ms. */
  everyMs: 250,
  /** A node silent this long (or the stall timeout, when shorter) is dead or stopped, ms. With a
   * beat every 250 ms and a look every `checkMs`, a process that stops is judged within
   * 1800 + 100 ms (and a round trip) of its last beat: under 2 s of the stop. */
  timeoutMs: 1800,
  /** How often the launcher looks at the beats (at most; an eighth of a shorter timeout), ms. */
  checkMs: 100,
  /** How often the main thread marks that its loop turned, ms. */
  loopTickMs: 100,
  /** Shortest lease (the time an agent keeps the stages of a launcher gone silent), ms: the
   * launcher itself may block for seconds (a checkpoint, the validation loss). */
  minLeaseMs: 30000,
} as const;

/** Node agents as NATS services (job/node-service.ts) and their discovery (job/node-discovery.ts). */
export const NODE_SERVICE_DEFAULTS = {
  /** Time each of a node's calibration measurements repeats for when it starts, ms (after one unmeasured run). */
  calibrateMs: 100,
  /** How long `baton nodes` and a discovering launcher gather the services' answers, ms. */
  discoverMs: 500,
  /** The server `baton nodes` asks when neither --nats nor the environment names one. */
  nats: 'nats://127.0.0.1:4222',
} as const;
