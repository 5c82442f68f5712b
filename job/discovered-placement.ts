// Placement on the speeds the node agents measured themselves (their baton-node INFO's
// gflops_stage): what `--placement auto` means for a training job whose nodes are
// discovered, or named without --node-speeds. The relative speeds are the measured GFLOP/s
// over the fastest node's; the heaviest stage goes to the fastest node (job/placement.ts)
// and, under the speed-aware partition, layers are split by those speeds. In a job of T
// ranks × D replicas every stage actor gets a node: a placement lists them in block order.
// A pure function.
//
// Only real compute is placed this way: the emulated compute of `run` takes its durations
// from the profile whatever node runs it (per-node speed factors are --node-speeds).

import { JobConfig } from './config';
import { placeStages } from './placement';

export interface MeasuredNode {
  readonly node: string;
  /** The reference stage's F+B, GFLOP/s, as the agent measured it. */
  readonly gflops_stage: number;
}

/** The agents a job over --nodes takes one each of: a stage actor per stage of every rank and replica. */
export const agentsNeeded = (cfg: Pick<JobConfig, 'stages' | 'tp' | 'dp'>): number => cfg.stages * cfg.tp * cfg.dp;

const isWide = (cfg: JobConfig) => cfg.tp > 1 || cfg.dp > 1;

/** Why `cfg` is not placed on measured speeds, or null when it is to be. */
export function unplacedBecause(cfg: JobConfig, nodes: readonly MeasuredNode[]): string | null {
  if (!cfg.train) return 'emulated compute';
  if (cfg.stageSpeeds !== null || cfg.placement !== null) return 'placed by the flags';
  const needed = agentsNeeded(cfg);
  if (nodes.length !== needed)
    return `${nodes.length} nodes for ${needed} stage actors${isWide(cfg) ? ' (stages × ranks × replicas)' : ''} (one each is placed)`;
  const unmeasured = nodes.find((n) => !(n.gflops_stage > 0));
  if (unmeasured) return `${unmeasured.node} reports no speed`;
  return null;
}

/** Relative speeds to three significant digits: a re-measure's noise below that changes nothing. */
const relative = (x: number, fastest: number) => Number((x / fastest).toPrecision(3));

/** Indices 0..n-1 sorted by `key` descending, ties in index order. */
const byDescending = (n: number, key: (i: number) => number): number[] =>
  Array.from({ length: n }, (_, i) => i).sort((a, b) => key(b) - key(a) || a - b);

/**
 * The node of every stage actor of a wide job, in block order (replica, rank, stage): the
 * T ranks of a stage's group wait for each other at every all-reduce, so each group gets
 * nodes of like speed, and the heaviest stage's groups the fastest ones.
 */
function laneNodes(cfg: JobConfig, nodes: readonly MeasuredNode[], work: readonly number[]): string[] {
  const fastest = byDescending(nodes.length, (k) => nodes[k].gflops_stage).map((k) => nodes[k].node);
  const out = new Array<string>(agentsNeeded(cfg));
  let next = 0;
  for (const s of byDescending(cfg.stages, (k) => work[k]))
    for (let d = 0; d < cfg.dp; d++)
      for (let r = 0; r < cfg.tp; r++) out[(d * cfg.tp + r) * cfg.stages + s] = fastest[next++];
  return out;
}

/**
 * `cfg` with the node of every stage actor, placed `auto` on `nodes` by their measured
 * speeds; `work` gives each stage's work at equal speeds. A job of one rank and one replica
 * also gets each stage's relative speed, which the speed-aware partition splits by; a wide
 * one is split evenly (a rank's share of a stage is cut where the even partition cuts).
 */
export function placeOnMeasured(cfg: JobConfig, nodes: readonly MeasuredNode[], work: readonly number[]): JobConfig {
  if (isWide(cfg)) return { ...cfg, placement: laneNodes(cfg, nodes, work) };
  const fastest = Math.max(...nodes.map((n) => n.gflops_stage));
  const placed = placeStages({
    stages: cfg.stages,
    nodes: nodes.map((n) => n.node),
    speeds: nodes.map((n) => relative(n.gflops_stage, fastest)),
    placement: 'auto',
    work,
  });
  return { ...cfg, stageSpeeds: placed.speeds, placement: placed.nodes };
}
