// What `baton train` reads from an iteration's reports, whatever the job's width: the loss
// (the mean of the replicas' last stages, each the mean over its microbatches, so D
// replicas of M report what one of D·M would), and the full parameters, gathered from
// replica 0's TP ranks into the TP = 1 layout (replicas hold the same parameters).

import { IterationRecord } from '../actors/coordinator';
import { laneStageStats } from '../checks/lanes';
import { eventsByIteration, mean } from '../checks/stats';
import { BatonEvent } from '../stage/events';
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

/** A wide job's time per iteration inside the TP group's and the replicas' all-reduces (from contributing to
 * holding the sum: a late peer's lateness included): the mean stage actor's, its share of the iteration's
 * makespan, each stage actor's (stage, rank, replica), and each iteration's (see perIteration). */
export function allReduceSummary(cfg: JobConfig, records: readonly IterationRecord[], events: readonly BatonEvent[]) {
  const actors = Array.from({ length: cfg.stages * cfg.tp * cfg.dp }, (_, i) => {
    const lane = Math.floor(i / cfg.stages);
    return { stage: i % cfg.stages, rank: lane % cfg.tp, replica: Math.floor(lane / cfg.tp), tp: 0, dp: 0, n: 0 };
  });
  for (const rec of records)
    rec.reports.forEach((r, i) => {
      const ms = r?.all_reduce_ms as { tp?: unknown; dp?: unknown } | undefined;
      const a = actors[i];
      if (!a || !ms || typeof ms.tp !== 'number' || typeof ms.dp !== 'number') return;
      a.tp += ms.tp;
      a.dp += ms.dp;
      a.n++;
    });
  const makespan = records.reduce((a, r) => a + r.makespan, 0) / Math.max(1, records.length);
  const n = actors.reduce((x, a) => x + a.n, 0);
  const mean = (f: (a: (typeof actors)[number]) => number) => actors.reduce((x, a) => x + f(a), 0) / Math.max(1, n);
  const share = (ms: number) => (makespan > 0 ? ms / makespan : 0);
  const tp = mean((a) => a.tp);
  const dp = mean((a) => a.dp);
  return {
    tp_all_reduce_ms: tp,
    tp_all_reduce_share: share(tp),
    dp_all_reduce_ms: dp,
    dp_all_reduce_share: share(dp),
    stage_actors: actors.length,
    per_stage_actor: actors.map((a) => ({
      stage: a.stage,
      rank: a.rank,
      replica: a.replica,
      tp_all_reduce_ms: a.tp / Math.max(1, a.n),
      dp_all_reduce_ms: a.dp / Math.max(1, a.n),
    })),
    per_iteration: perIteration(records, events),
  };
}

/** The mean stage actor's ms in TP coordination and TP peer wait (open rounds, from the events) and in the all-reduces, per iteration,
 * with the iteration's makespan: the first iteration pays for compilation, so a reader can leave it out. */
function perIteration(records: readonly IterationRecord[], events: readonly BatonEvent[]) {
  // Grouped once (filtering the whole trace per iteration would read it once per iteration).
  const byIteration = eventsByIteration(events);
  return records.map((rec) => {
    const lanes = laneStageStats(byIteration.get(rec.iteration) ?? [], () => true);
    const reported = rec.reports.map((r) => r?.all_reduce_ms as { tp?: number; dp?: number } | undefined);
    return {
      iteration: rec.iteration,
      makespan_ms: rec.makespan,
      tp_coordination_ms: mean(lanes.map((l) => l.tp_coordination_ms)),
      tp_peer_wait_ms: mean(lanes.map((l) => l.tp_peer_wait_ms)),
      tp_all_reduce_ms: mean(reported.map((r) => (typeof r?.tp === 'number' ? r.tp : 0))),
      dp_all_reduce_ms: mean(reported.map((r) => (typeof r?.dp === 'number' ? r.dp : 0))),
    };
  });
}
