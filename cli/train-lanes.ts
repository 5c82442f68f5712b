// What `baton train` reads from an iteration's reports, whatever the job's width: the loss
// (the mean of the replicas' last stages, each the mean over its microbatches, so D
// replicas of M report what one of D·M would), and the full parameters, gathered from
// replica 0's TP ranks into the TP = 1 layout (replicas hold the same parameters).

import { IterationRecord } from '../actors/coordinator';
import { StageSnapshot } from '../compute/chunk-optimizer';
import { JobConfig } from '../job/config';
import { gatherRanks, tpModelFor } from '../models/tp/tp-layers';
import { corpusFor } from '../models/train-config';
import { laneIndex } from '../transport/lanes';

const reportOf = (cfg: JobConfig, rec: IterationRecord, stage: number, rank: number, replica: number) =>
  rec.reports[laneIndex({ rank, replica, ranks: cfg.tp }) * cfg.stages + stage];

/** The iteration's loss: the mean over the replicas of their last stage's (rank 0's) loss. */
export function iterationLoss(cfg: JobConfig, rec: IterationRecord): number | undefined {
  const losses = Array.from(
    { length: cfg.dp },
    (_, r) => reportOf(cfg, rec, cfg.stages - 1, 0, r)?.loss as number | undefined,
  );
  if (losses.some((l) => l === undefined)) return undefined;
  return (losses as number[]).reduce((a, b) => a + b, 0) / losses.length;
}

/** Replica 0's stage snapshots in this record (stage-major, then rank), or null when a stage sent none. */
function replicaSnapshots(cfg: JobConfig, rec: IterationRecord): StageSnapshot[][] | null {
  const out: StageSnapshot[][] = [];
  for (let s = 0; s < cfg.stages; s++) {
    const ranks = Array.from(
      { length: cfg.tp },
      (_, rank) => reportOf(cfg, rec, s, rank, 0)?.snapshot as StageSnapshot | undefined,
    );
    if (ranks.some((x) => !x)) return null;
    out.push(ranks as StageSnapshot[]);
  }
  return out;
}

/** The full parameters the record's snapshots hold (TP ranks gathered), or null when it has none. */
export function recordParams(cfg: JobConfig, rec: IterationRecord): Map<string, Float32Array> | null {
  const stages = replicaSnapshots(cfg, rec);
  if (!stages) return null;
  const params = new Map<string, Float32Array>();
  const model = cfg.tp > 1 ? tpModelFor(cfg.train!, corpusFor(cfg.train!).vocabSize, cfg.tp) : null;
  for (const ranks of stages) {
    const maps = ranks.map((snap) => new Map(Object.entries(snap.params)));
    for (const [n, v] of model ? gatherRanks(model, maps) : maps[0]!) params.set(n, v);
  }
  return params;
}

/** A record's per-stage snapshots when the job is one rank and one replica wide (what a checkpoint holds). */
export function plainSnapshots(cfg: JobConfig, rec: IterationRecord): StageSnapshot[] | null {
  if (cfg.tp > 1 || cfg.dp > 1) return null;
  return replicaSnapshots(cfg, rec)?.map((r) => r[0]!) ?? null;
}

/** A wide job's mean time per stage actor and iteration inside the TP group's and the replicas' all-reduces, and its share of the iteration's makespan. */
export function allReduceSummary(cfg: JobConfig, records: readonly IterationRecord[]) {
  let tp = 0;
  let dp = 0;
  let n = 0;
  for (const rec of records)
    for (const r of rec.reports) {
      const ms = r?.all_reduce_ms as { tp?: unknown; dp?: unknown } | undefined;
      if (!ms || typeof ms.tp !== 'number' || typeof ms.dp !== 'number') continue;
      tp += ms.tp;
      dp += ms.dp;
      n++;
    }
  const makespan = records.reduce((a, r) => a + r.makespan, 0) / Math.max(1, records.length);
  const mean = (x: number) => x / Math.max(1, n);
  const share = (x: number) => (makespan > 0 ? mean(x) / makespan : 0);
  return {
    tp_all_reduce_ms: mean(tp),
    tp_all_reduce_share: share(tp),
    dp_all_reduce_ms: mean(dp),
    dp_all_reduce_share: share(dp),
    stage_actors: cfg.stages * cfg.tp * cfg.dp,
  };
}
