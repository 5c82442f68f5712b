// The body of a stage's end-of-iteration report, checked before the coordinator takes
// it. A report is a peer's message: the launcher reads its fields (the parameter store's
// statistics, the losses, the snapshot it checkpoints), so one it cannot read is refused
// and counted, and the stage's own report still finds its place.

import { Check, finite, isMap, listOf } from '../base/checks';

const count: Check = (v) => (Number.isSafeInteger(v) && (v as number) >= 0 ? null : 'a whole number ≥ 0');
const amount: Check = (v) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? null : 'a finite number ≥ 0');
// A diverged run's losses are not finite, and it still reports them.
const number: Check = (v) => (typeof v === 'number' ? null : 'a number');
const text: Check = (v) => (typeof v === 'string' ? null : 'text');
const fields =
  (spec: Record<string, Check>): Check =>
  (v) => {
    if (!isMap(v)) return 'a map';
    for (const [k, check] of Object.entries(spec)) {
      const problem = check(v[k]);
      if (problem) return `a map whose ${k} is ${problem}`;
    }
    return null;
  };

/** What keeps `v` from being a stage snapshot (a report's, or a checkpoint's stage file), or null. */
export function snapshotProblem(v: unknown): string | null {
  if (!isMap(v) || !isMap(v.params) || !Array.isArray(v.optimizer))
    return 'not a map of params (a map) and optimizer (a list)';
  for (const [k, p] of Object.entries(v.params))
    if (!(p instanceof Float32Array)) return `parameter ${JSON.stringify(k.slice(0, 80))} is not a float32 array`;
  return null;
}

const SNAPSHOT: Check = (v) => {
  const problem = snapshotProblem(v);
  return problem && `a stage snapshot (${problem})`;
};

const FIELDS: Record<string, Check> = {
  peakInflight: count,
  store: fields({
    updates: count,
    inflightBound: count,
    delay: amount,
    staleness: fields({ mean: finite, max: finite, count }),
    stalenessByUpdate: listOf(finite, 'finite numbers'),
    extraStateBytes: amount,
    optimizerBytes: amount,
    consistency: text,
  }),
  snapshot: SNAPSHOT,
  loss: number,
  lossCount: count,
  losses: listOf(number, 'numbers'),
  lr: number,
  step: count,
};

/** What is wrong with `body` as a report body, or null: each known field the launcher reads has its shape, and `required` are there. */
export function reportBodyProblem(body: Record<string, unknown>, required: readonly string[]): string | null {
  for (const k of ['peakInflight', ...required]) if (!Object.hasOwn(body, k)) return `the report has no ${k}`;
  for (const [k, check] of Object.entries(FIELDS)) {
    if (!Object.hasOwn(body, k)) continue;
    const problem = check(body[k]);
    if (problem) return `the report's ${k} is not ${problem}`;
  }
  return null;
}

/** The fields the launcher reads from `stage`'s reports under `cfg`. */
export function requiredReportFields(
  cfg: { readonly mode: 'sync' | 'async'; readonly train: unknown; readonly stages: number },
  stage: number,
): string[] {
  const keys = cfg.mode === 'async' ? ['store'] : [];
  if (cfg.train && stage === cfg.stages - 1) keys.push(cfg.mode === 'async' ? 'losses' : 'loss');
  return keys;
}
