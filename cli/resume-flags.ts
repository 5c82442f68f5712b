// `baton train --resume`: the settings of the saved run come from its meta.json, so a
// resumed run needs no flag repeated. A flag the user gives still wins; whether its value
// may differ from the saved one is checkResumable's business (job/checkpoint.ts): the
// model, data, microbatches and optimizer may not, the policy, jitter, transport and
// the like may. --iterations may only grow: a larger value extends the run.

import { CheckpointMeta } from '../job/checkpoint';
import { UsageError } from './args';

type Saved = { [k: string]: unknown; train?: Record<string, unknown> };

/** Flag (its camelCase key) → where the saved job config keeps its value. */
const FROM_CONFIG: Record<string, (c: Saved) => unknown> = {
  stages: (c) => c.stages,
  chunks: (c) => c.chunks,
  microbatches: (c) => c.microbatches,
  policy: (c) => c.policy,
  profile: (c) => c.profile,
  jitter: (c) => c.jitter,
  jitterSeed: (c) => c.seed,
  bufferLimit: (c) => (c.bufferLimit === undefined ? undefined : String(c.bufferLimit)),
  mode: (c) => c.mode,
  model: (c) => c.train?.model,
  data: (c) => c.train?.data ?? undefined,
  microbatchSize: (c) => c.train?.microbatchSize,
  seq: (c) => c.train?.seq,
  layers: (c) => c.train?.layers,
  width: (c) => c.train?.width,
  heads: (c) => c.train?.heads,
  lr: (c) => c.train?.lr,
  warmup: (c) => c.train?.warmup,
  seed: (c) => c.train?.seed,
  iterations: (c) => c.train?.totalIterations,
  checkpointEvery: (c) => c.train?.checkpointEvery,
  valBatches: (c) => c.train?.valBatches,
};

/**
 * Fills every flag the user did not give from the checkpoint's saved config (in place),
 * and refuses an --iterations below the saved run's. Returns the flags it filled.
 */
export function fillFlagsFromCheckpoint(
  flags: Record<string, unknown>,
  given: ReadonlySet<string>,
  meta: CheckpointMeta,
): string[] {
  const saved = (meta.config ?? {}) as Saved;
  const filled: string[] = [];
  for (const [key, read] of Object.entries(FROM_CONFIG)) {
    if (given.has(key)) continue;
    const v = read(saved);
    if (v === undefined || v === null) continue;
    flags[key] = v;
    filled.push(key);
  }
  const savedTotal = saved.train?.totalIterations;
  if (given.has('iterations') && typeof savedTotal === 'number' && (flags.iterations as number) < savedTotal)
    throw new UsageError(
      `train: --iterations ${String(flags.iterations)} is below the saved run's ${savedTotal}; a resumed run may extend a run (a larger --iterations), not shorten it`,
    );
  return filled;
}
