// `baton train`: pipeline training with real compute (TensorFlow.js), synchronous or asynchronous.
// The stages train their slices of the model on tensors that travel in the messages;
// this launcher collects losses, the final parameters (for the checksum and the
// validation loss) and writes checkpoints from the stages' reports.

import { JobConfig } from '../job/config';
import { IterationRecord } from '../actors/coordinator';
import {
  CheckpointError,
  checkFiles,
  hasCheckpoint,
  corpusDigest,
  readCheckpointMeta,
  writeCheckpoint,
} from '../job/checkpoint';
import { JobResult, runJob, summarize } from '../job/run-local';
import { DistributedResult, RecoveryRecord } from '../job/run-distributed';
import { StageSnapshot } from '../compute/chunk-optimizer';
import { EventSink } from '../stage/events';
import { BackendReport, loadBackend } from '../models/backend';
import { kernelSetName, setNativeThreads } from '../models/native-kernels';
import { cores, defaultThreads, threadsFromEnv } from '../models/threads';
import { paramChecksum, validationLoss } from '../models/reference-train';
import { TrainConfig, checkTrainSize, corpusFor, modelSpecFor, tokensPerMicrobatch } from '../models/train-config';
import { ModelSpec } from '../models/stage-module';
import { warnRejects } from './rejects';
import { runOnce } from './run-once';
import { TrainSetup } from './train-setup';
import { allReduceSummary, iterationLoss, plainSnapshots, recordParams } from './train-lanes';

export { TRAIN_FLAGS, TRAIN_HELP } from './train-flags';
export { TrainSetup, trainConfigsFromFlags } from './train-setup';

export interface TrainOutcome {
  backend: string;
  /** The kernel set (kernelSetName): 'tfjs' or the native kernels. */
  kernels: string;
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
  /** Over NATS with --max-restarts: each lost stage process survived (what, detected, resumed, replayed). */
  recoveries?: RecoveryRecord[];
  kept_state?: DistributedResult['kept_state'];
  /** A job of T > 1 ranks or D > 1 replicas: the time its stage actors spent in all-reduces per iteration. */
  all_reduce?: ReturnType<typeof allReduceSummary>;
}

/** What a caller may watch while the run goes (progress, metrics) and take after it (the job's result). */
export interface TrainHooks {
  /** A synchronous iteration ended, with the loss of its last stage. */
  readonly onIteration?: (rec: IterationRecord, loss: number | undefined) => void;
  /** Every event of the job, as it comes (over NATS with stage processes: as their trace batches come). */
  readonly sinks?: EventSink[];
  /** The finished job's result (events, records) for the trace, chart and report. */
  readonly onResult?: (r: JobResult) => void;
}

export async function train(cfg: JobConfig, setup: TrainSetup, hooks: TrainHooks = {}): Promise<TrainOutcome> {
  const t = cfg.train!;
  const loaded = await loadBackend({ force: t.backend ?? undefined });
  const backend = loaded.backend;
  const kernels = kernelSetOf(cfg, setup, loaded);
  const corpus = corpusFor(t);
  corpus.checkFits(t.seq);
  const spec = modelSpecFor(t, corpus.vocabSize);
  checkTrainSize(t, spec);
  const corpusSha = corpusDigest(corpus.text);
  if (t.startIteration > 0 && t.checkpoint) checkResumedFiles(t.checkpoint, { backend, kernels }, spec, corpusSha);
  // D replicas train on D·M microbatches an iteration.
  const tokens = cfg.microbatches * cfg.dp * tokensPerMicrobatch(t);
  let last: Map<string, Float32Array> | null = null;
  const onIteration = (rec: IterationRecord) => {
    last = recordParams(cfg, rec) ?? last;
    const snaps = plainSnapshots(cfg, rec);
    if (snaps && t.checkpoint) saveCheckpoint(t.checkpoint, cfg, rec, snaps, { spec, corpusSha, backend, kernels });
    if (cfg.mode === 'sync') hooks.onIteration?.(rec, iterationLoss(cfg, rec));
  };
  const o = await runTrainJob(cfg, setup, onIteration, hooks.sinks ?? []);
  warnRejects('train', o.result);
  hooks.onResult?.(o.result);
  return outcomeOf(cfg, setup, o, last, { spec, backend, kernels, tokens });
}

/**
 * Sets this process's BLAS threads and names the kernel set the run computes with. This
 * process computes when the stages run in it (and for the validation loss at the end);
 * stage processes it starts get an even share of the cores (cli/run-once.ts), unless told.
 */
function kernelSetOf(cfg: JobConfig, setup: TrainSetup, loaded: BackendReport): string {
  const given = setup.threads ?? threadsFromEnv();
  setNativeThreads(given ?? cores());
  const perStage = setup.clock !== 'virtual' && setup.transport === 'nats' && setup.processes === 'per-stage';
  return kernelSetName(loaded.kernels, given ?? (perStage ? defaultThreads(cfg.stages * cfg.tp * cfg.dp) : cores()));
}

/** A resumed run's checkpoint: saved on this backend with this kernel set, its files those its meta.json names. */
function checkResumedFiles(
  dir: string,
  { backend, kernels }: { backend: string; kernels: string },
  spec: ModelSpec,
  corpusSha: string,
): void {
  const meta = readCheckpointMeta(dir);
  if (meta.backend !== undefined && meta.backend !== backend)
    throw new CheckpointError(
      `cannot resume ${JSON.stringify(dir)}: it was saved by a run on the ${meta.backend} backend and this run would use ${backend}; backends round differently, so it would continue neither run (give --backend ${meta.backend})`,
    );
  if (meta.kernels !== undefined && meta.kernels !== kernels)
    throw new CheckpointError(
      `cannot resume ${JSON.stringify(dir)}: it was saved by a run with the kernel set ${meta.kernels} and this run has ${kernels}; kernel sets round differently, so it would continue neither run (BATON_KERNELS=${meta.kernels === 'tfjs' ? 'tfjs' : 'native'} chooses)`,
    );
  checkFiles(dir, meta, { corpus: corpusSha, checksumOf: (params) => paramChecksum(spec, params) });
}

/** Writes the iteration's checkpoint, unless the run diverged: then the last good one stays. */
function saveCheckpoint(
  dir: string,
  cfg: JobConfig,
  rec: IterationRecord,
  snaps: StageSnapshot[],
  o: { spec: ModelSpec; corpusSha: string; backend: string; kernels: string },
): void {
  // A diverged run's parameters are not finite: the last good checkpoint stays.
  const finite = snaps.every((s) => Object.values(s.params).every((p) => p.every(Number.isFinite)));
  if (!finite) {
    const kept = hasCheckpoint(dir)
      ? `${dir} keeps the last one`
      : `and ${dir} holds none (the parameters were never finite at a checkpoint)`;
    process.stderr.write(
      `baton train: iteration ${rec.iteration + 1}: the parameters are not finite (the run diverged); no checkpoint written, ${kept}\n`,
    );
    return;
  }
  const params = new Map(snaps.flatMap((s) => Object.entries(s.params)));
  writeCheckpoint(
    dir,
    {
      nextIteration: rec.iteration + 1,
      stages: cfg.stages,
      chunks: cfg.chunks,
      checksum: paramChecksum(o.spec, params),
      corpus: o.corpusSha,
      backend: o.backend,
      kernels: o.kernels,
      config: cfg,
    },
    snaps,
  );
}

interface TrainRun {
  result: JobResult;
  transport: string;
  processes: number;
  pids: number[];
}

/** The job on the virtual clock in this process, or on the real clock as `baton run` runs it. */
async function runTrainJob(
  cfg: JobConfig,
  setup: TrainSetup,
  onIteration: (rec: IterationRecord) => void,
  sinks: EventSink[],
): Promise<TrainRun> {
  return setup.clock === 'virtual'
    ? {
        result: await runJob(cfg, { clock: 'virtual', onIteration, sinks, swaps: setup.swaps }),
        transport: 'local',
        processes: 1,
        pids: [process.pid],
      }
    : await runOnce(cfg, { ...setup, onIteration, sinks });
}

function outcomeOf(
  cfg: JobConfig,
  setup: TrainSetup,
  o: TrainRun,
  params: Map<string, Float32Array> | null,
  m: { spec: ModelSpec; backend: string; kernels: string; tokens: number },
): TrainOutcome {
  const t: TrainConfig = cfg.train!;
  const records = o.result.records;
  const losses =
    cfg.mode === 'async'
      ? (records[0].reports[cfg.stages - 1].losses as number[])
      : records.map((r) => iterationLoss(cfg, r) as number);
  if (!params) throw new Error('the stages sent no final parameters');
  const seconds = records.reduce((a, r) => a + r.makespan, 0) / 1000;
  // Asynchronous runs report one loss per update: the final loss is the mean of the last 5%.
  const tail = cfg.mode === 'async' ? losses.slice(-Math.max(1, Math.ceil(losses.length / 20))) : losses.slice(-1);
  return {
    backend: m.backend,
    kernels: m.kernels,
    losses,
    final_loss: tail.reduce((a, b) => a + b, 0) / tail.length,
    val_loss: validationLoss(t, params, t.valBatches),
    tokens_per_s: setup.clock === 'virtual' ? null : (m.tokens * records.length) / seconds,
    clock: setup.clock ?? 'real',
    param_checksum: paramChecksum(m.spec, params),
    iterations_run: records.length,
    start_iteration: t.startIteration,
    summary: { ...summarize(o.result), transport: o.transport, processes: o.processes, pids: o.pids },
    ...recoveriesOf(o.result),
    ...(cfg.tp > 1 || cfg.dp > 1 ? { all_reduce: allReduceSummary(cfg, records, o.result.events) } : {}),
  };
}

/** A recoverable run's failures survived and what keeping the stages' state cost (job/recovery.ts). */
function recoveriesOf(r: JobResult): Pick<TrainOutcome, 'recoveries' | 'kept_state'> {
  const d = r as Partial<DistributedResult>;
  return d.recoveries ? { recoveries: d.recoveries, ...(d.kept_state ? { kept_state: d.kept_state } : {}) } : {};
}
