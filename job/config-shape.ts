// The shape of a job config that arrives over the network (a node agent's host request):
// a plain map whose every field has its JobConfig type, checked before anything reads it,
// so nonsense is refused naming the field instead of hosted with defaults or failing later
// as a TypeError. Ranges beyond the type are left to planJob and the modules that use them.

import { Check, finite, isMap } from '../base/checks';
import { quoteValue } from '../base/quote';
import { checkJobName } from '../transport/subjects';
import { JITTER_MODES } from '../models/jitter';
import { RANK_JITTER_MODES } from '../models/lane-durations';
import { faultSpecProblem } from '../transport/fault-spec';
import { TrainConfig } from '../models/train-config';
import { MAX_TIMER_MS } from '../base/clock';
import { JobConfig } from './config';
import { AsyncSettings, BACKWARD_MODES, CONSISTENCY_POLICIES } from '../actors/param-store';
import { JobConfigError } from './wire-stage';

const integer =
  (min: number): Check =>
  (v) =>
    Number.isSafeInteger(v) && (v as number) >= min ? null : `an integer >= ${min}`;
const anyInteger: Check = (v) => (Number.isSafeInteger(v) ? null : 'an integer');
const text: Check = (v) => (typeof v === 'string' ? null : 'a string');
const textOrNull: Check = (v) => (v === null || typeof v === 'string' ? null : 'a string or null');
const flag: Check = (v) => (typeof v === 'boolean' ? null : 'true or false');
const oneOf =
  (values: readonly string[]): Check =>
  (v) =>
    typeof v === 'string' && values.includes(v) ? null : `one of ${values.join(', ')}`;

const TRAIN_FIELDS: Record<keyof TrainConfig, Check> = {
  model: oneOf(['gpt', 'mlp']),
  data: textOrNull,
  microbatchSize: integer(1),
  seq: integer(1),
  layers: integer(1),
  width: integer(1),
  heads: integer(1),
  lr: finite,
  warmup: integer(0),
  weightDecay: finite,
  seed: anyInteger,
  backend: textOrNull,
  checkpoint: textOrNull,
  checkpointEvery: integer(0),
  startIteration: integer(0),
  totalIterations: integer(1),
  valBatches: integer(0),
};

const ASYNC_FIELDS: Record<keyof AsyncSettings, Check> = {
  consistency: oneOf(CONSISTENCY_POLICIES),
  alpha: finite,
  lr: finite,
  warmup: integer(0),
  totalUpdates: integer(0),
  weightDecay: finite,
  beta1: finite,
  clip: finite,
  pipemareDamping: flag,
  pipemareSteps: integer(0),
  lrd: flag,
  backward: oneOf(BACKWARD_MODES),
  controlStages: integer(1),
  snapshotEvery: integer(0),
  firstMicrobatch: integer(0),
};

const JOB_FIELDS: Record<keyof JobConfig, Check | { nested: Record<string, Check>; nullable: boolean }> = {
  // The job name's own check says what a name must be (a subject token).
  job: (v) => (checkJobName(v), null),
  stages: integer(1),
  microbatches: integer(1),
  chunks: integer(1),
  tp: integer(1),
  dp: integer(1),
  policy: text,
  profile: text,
  jitter: oneOf(JITTER_MODES),
  rankJitter: oneOf(RANK_JITTER_MODES),
  jitterScale: (v) => (typeof v === 'number' && v >= 0 && Number.isFinite(v) ? null : 'a finite number >= 0'),
  bufferLimit: (v) =>
    v === 'depth' || (Number.isSafeInteger(v) && (v as number) >= 1) ? null : 'an integer >= 1 or "depth"',
  seed: anyInteger,
  iterations: integer(1),
  warmupIterations: integer(0),
  stallTimeoutMs: (v) =>
    typeof v === 'number' && v >= 1 && v <= MAX_TIMER_MS ? null : `a number of ms from 1 to ${MAX_TIMER_MS}`,
  firstIteration: integer(0),
  train: { nested: TRAIN_FIELDS, nullable: true },
  mode: oneOf(['sync', 'async']),
  async: { nested: ASYNC_FIELDS, nullable: false },
  partition: oneOf(['uniform', 'speed']),
  stageSpeeds: (v) =>
    v === null || (Array.isArray(v) && v.every((x) => typeof x === 'number' && x > 0 && Number.isFinite(x)))
      ? null
      : 'null or a list of positive numbers',
  placement: (v) =>
    v === null || (Array.isArray(v) && v.every((x) => typeof x === 'string')) ? null : 'null or a list of node names',
  faults: faultSpecProblem,
};

/** Refuse fields it does not know, and those of a wrong type; every field of `fields` is required when `complete`. */
function checkFields(
  value: Record<string, unknown>,
  fields: Record<string, Check | { nested: Record<string, Check>; nullable: boolean }>,
  where: string,
  complete: boolean,
): void {
  for (const key of Object.keys(value))
    if (!Object.prototype.hasOwnProperty.call(fields, key))
      throw new JobConfigError(`${where}: unknown field ${quoteValue(key, 60)}`);
  for (const [key, check] of Object.entries(fields)) {
    const v = value[key];
    const field = `${where}.${key}`;
    if (v === undefined) {
      if (complete) throw new JobConfigError(`${field} is missing`);
      continue;
    }
    if (typeof check === 'function') {
      const want = check(v);
      if (want) throw new JobConfigError(`${field} must be ${want}, got ${quoteValue(v, 60)}`);
    } else if (!(check.nullable && v === null)) {
      if (!isMap(v))
        throw new JobConfigError(`${field} must be a map${check.nullable ? ' or null' : ''}, got ${quoteValue(v, 60)}`);
      checkFields(v, check.nested, field, true);
    }
  }
}

/** A host request's config, refused (JobConfigError naming the field) unless it has the shape of a partial JobConfig. */
export function checkConfigShape(config: unknown): Partial<JobConfig> {
  if (!isMap(config))
    throw new JobConfigError(`config must be a map of JobConfig fields, got ${quoteValue(config, 60)}`);
  checkFields(config, JOB_FIELDS, 'config', false);
  return config as Partial<JobConfig>;
}
