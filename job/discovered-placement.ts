// Placement on the speeds the node agents measured themselves (their baton-node INFO's
// gflops_stage): what `--placement auto` means for a training job whose nodes are
// discovered, or named without --node-speeds. The relative speeds are the measured GFLOP/s
// over the fastest node's; the heaviest stage goes to the fastest node (job/placement.ts)
// and, under the speed-aware partition, layers are split by those speeds. A pure function.
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

/** Why `cfg` is not placed on measured speeds, or null when it is to be. */
export function unplacedBecause(cfg: JobConfig, nodes: readonly MeasuredNode[]): string | null {
  if (!cfg.train) return 'emulated compute';
  if (cfg.stageSpeeds !== null || cfg.placement !== null) return 'placed by the flags';
  if (cfg.tp !== 1 || cfg.dp !== 1) return 'a job of several ranks or replicas';
  if (nodes.length !== cfg.stages) return `${nodes.length} nodes for ${cfg.stages} stages (one each is placed)`;
  const unmeasured = nodes.find((n) => !(n.gflops_stage > 0));
  if (unmeasured) return `${unmeasured.node} reports no speed`;
  return null;
}

/** Relative speeds to three significant digits: a re-measure's noise below that changes nothing. */
const relative = (x: number, fastest: number) => Number((x / fastest).toPrecision(3));

/**
 * `cfg` with the node and relative speed of every stage, placed `auto` on `nodes` by their
 * measured speeds; `work` gives each stage's work at equal speeds.
 */
export function placeOnMeasured(cfg: JobConfig, nodes: readonly MeasuredNode[], work: readonly number[]): JobConfig {
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
