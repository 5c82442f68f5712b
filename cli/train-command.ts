// `baton train` on the command line: flags, progress on stderr, the table or the JSON
// object, and the files the flags ask for (cli/train-outputs.ts).

import { JobConfig } from '../job/config';
import { JobResult } from '../job/run-local';
import { readCheckpointMeta } from '../job/checkpoint';
import { tokensPerMicrobatch } from '../models/train-config';
import { ParsedFlags, UsageError, camel, parseFlags, printedHelp } from './args';
import { jobFileText, withJobFile } from './job-file';
import { removeMadeDirs } from './output-paths';
import { TRAIN_FLAGS, TRAIN_HELP } from './train-flags';
import { fillFlagsFromCheckpoint } from './resume-flags';
import { TrainSetup, trainConfigsFromFlags } from './train-setup';
import { TrainHooks, TrainOutcome, train } from './train';
import { writeRunReport } from './report/report-write';
import { MetricsFile, iterationMetrics, progressFor, trainOutputPaths, writeTrainFiles } from './train-outputs';

/** Where the checkpoint in `dir` stands (a diverged run leaves the last finite one). */
function savedAt(dir: string): string {
  try {
    return `(next iteration ${readCheckpointMeta(dir).nextIteration})`;
  } catch {
    return '(none written: the parameters were never finite)';
  }
}

/** The flags that set the asynchronous parameter stores mean nothing without --mode async, and --state-every nothing with it: refused. */
function refuseFlagsOfTheOtherMode(mode: unknown, given: ReadonlySet<string>): void {
  const asyncOnly = ['consistency', 'alpha', 'beta1', 'lrd', 'backward', 'control-stages', 'snapshot-every'].filter(
    (k) => given.has(camel(k)),
  );
  if (mode !== 'async' && asyncOnly.length > 0)
    throw new UsageError(
      `train: ${asyncOnly.map((k) => `--${k}`).join(', ')} set${asyncOnly.length === 1 ? 's' : ''} the asynchronous parameter stores; add --mode async${asyncOnly.includes('snapshot-every') ? ' (sync recovery keeps state every --state-every N flushes)' : ''}`,
    );
  if (mode === 'async' && given.has('stateEvery'))
    throw new UsageError(
      'train: --state-every sets how often sync stages keep state; an asynchronous job snapshots every --snapshot-every N updates',
    );
}

export async function trainCommand(argv: readonly string[], out: (s: string) => void): Promise<number> {
  const { flags, given } = withJobFile(parseFlags(argv, TRAIN_FLAGS, 'train'), 'train', TRAIN_FLAGS);
  if (printedHelp(flags, TRAIN_HELP, out)) return 0;
  refuseFlagsOfTheOtherMode(flags.mode, given);
  // As in `baton run`: without NATS every stage runs in this process, whatever --processes asks.
  if (flags.transport !== 'nats' && given.has('processes'))
    throw new UsageError(
      'train: --transport local runs every stage in this process; --processes needs --transport nats',
    );
  // A resumed run takes the saved run's settings for every flag not given.
  if (flags.resume && flags.checkpoint)
    fillFlagsFromCheckpoint(flags, given, readCheckpointMeta(String(flags.checkpoint)));
  const { cfg, setup, madeDirs } = trainConfigsFromFlags(flags);
  if (flags.printConfig) {
    removeMadeDirs(madeDirs);
    out(jobFileText(flags, 'train', TRAIN_FLAGS));
    return 0;
  }
  let watch: ReturnType<typeof watchers>;
  try {
    watch = watchers(flags, cfg, setup);
  } catch (err) {
    removeMadeDirs(madeDirs); // an output path refused: nothing ran
    throw err;
  }
  let r: TrainOutcome;
  try {
    r = await train(cfg, setup, watch.hooks);
  } catch (err) {
    // Refused (backend, corpus, model size) or failed before its first checkpoint: the directories made for it go.
    removeMadeDirs(madeDirs);
    throw err;
  } finally {
    watch.progress?.finish();
  }
  const written = watch.writeFiles(r);
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
    out(JSON.stringify(jsonOf(r, cfg)));
    return diverged();
  }
  out(
    `backend ${r.backend}, kernels ${r.kernels}; ${cfg.train!.model} on ${cfg.train!.data ?? 'the synthetic corpus'}; P=${cfg.stages} V=${cfg.chunks}${cfg.tp > 1 || cfg.dp > 1 ? ` TP=${cfg.tp} DP=${cfg.dp}` : ''} ${cfg.mode === 'async' ? `M=${cfg.microbatches / cfg.train!.totalIterations} per iteration, ${cfg.microbatches} updates without a flush,` : `M=${cfg.microbatches}`} policy ${cfg.policy}, ${r.summary.transport} (${r.summary.processes} process${r.summary.processes > 1 ? 'es' : ''})`,
  );
  out(
    `final loss ${r.final_loss.toFixed(4)}, validation loss ${r.val_loss.toFixed(4)}, ${r.tokens_per_s === null ? 'no throughput on the virtual clock' : `${r.tokens_per_s.toFixed(0)} tokens/s`}`,
  );
  out(`param checksum ${r.param_checksum}`);
  if (r.all_reduce && r.summary.breakdown) {
    const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
    const b = r.summary.breakdown;
    out(
      `per stage actor and iteration: TP coordination ${b.tp_coordination_ms.toFixed(1)} ms (${pct(b.tp_coordination_share)}) and TP peer wait ${b.tp_peer_wait_ms.toFixed(1)} ms (${pct(b.tp_peer_wait_share)}), TP all-reduce ${r.all_reduce.tp_all_reduce_ms.toFixed(1)} ms (${pct(r.all_reduce.tp_all_reduce_share)}), replicas' all-reduce ${r.all_reduce.dp_all_reduce_ms.toFixed(1)} ms (${pct(r.all_reduce.dp_all_reduce_share)}) of the iteration`,
    );
    const later = r.all_reduce.per_iteration.slice(1);
    if (later.length > 0) {
      const sum = (f: (x: (typeof later)[number]) => number) => later.reduce((a, x) => a + f(x), 0);
      const span = sum((x) => x.makespan_ms);
      out(
        `after the first iteration (${later.length}): TP coordination ${pct(sum((x) => x.tp_coordination_ms) / span)}, TP peer wait ${pct(sum((x) => x.tp_peer_wait_ms) / span)}, TP all-reduce ${pct(sum((x) => x.tp_all_reduce_ms) / span)}, replicas' all-reduce ${pct(sum((x) => x.dp_all_reduce_ms) / span)} of the iteration`,
      );
    }
  }
  if (cfg.train!.checkpoint) out(`checkpoint: ${cfg.train!.checkpoint} ${savedAt(cfg.train!.checkpoint)}`);
  for (const w of written) out(`wrote ${w}`);
  return diverged();
}

/** The one JSON object of --json (and the report's row). */
function jsonOf(r: TrainOutcome, cfg: JobConfig) {
  const { summary, ...rest } = r;
  // The job summary's seed is the jitter seed; the model's seed is --seed.
  return { ...rest, ...summary, seed: cfg.train!.seed, jitter_seed: summary.seed };
}

/** Progress, metrics and the files written after the run, as the flags ask. */
function watchers(flags: ParsedFlags, cfg: JobConfig, setup: TrainSetup) {
  const t = cfg.train!;
  const paths = trainOutputPaths(flags);
  const perMb = tokensPerMicrobatch(t);
  const sync = cfg.mode === 'sync';
  const clock = setup.clock ?? 'real';
  const progress = progressFor(flags, {
    mode: cfg.mode,
    total: sync ? t.totalIterations - t.startIteration : cfg.microbatches,
    first: sync ? t.startIteration : 0,
    tokensPerUnit: sync ? perMb * cfg.microbatches : perMb,
    clock,
  });
  const metrics = paths.metrics && sync ? new MetricsFile(paths.metrics) : null;
  const start = performance.now();
  let result: JobResult | null = null;
  const hooks: TrainHooks = {
    onIteration: (rec, loss) => {
      progress?.onIteration(rec, loss);
      metrics?.add(iterationMetrics(rec, loss, perMb * cfg.microbatches, clock, performance.now() - start));
    },
    sinks: progress && !sync ? [progress.sink] : [],
    onResult: (res) => (result = res),
  };
  const writeFiles = (r: TrainOutcome): string[] => {
    if (!result) return [];
    const run = {
      result,
      mode: cfg.mode,
      losses: r.losses,
      valLoss: r.val_loss,
      firstIteration: t.startIteration,
      title: `${t.model} P=${cfg.stages} ${cfg.mode}${cfg.mode === 'async' ? ` ${cfg.async.consistency}` : ''}, policy ${cfg.policy}`,
    };
    const written = writeTrainFiles(paths, run);
    if (paths.report)
      written.push(
        writeRunReport(paths.report, [jsonOf(r, cfg)], [result], [cfg.policy], `Baton training report: ${run.title}`),
      );
    return written;
  };
  return { hooks, progress, writeFiles };
}
