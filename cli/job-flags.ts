// The flags every job command shares (sim, run, train), mapped onto JobConfig.

import { DEFAULTS, JobConfig, resolveConfig } from '../job/config';
import { JITTER_MODES, JitterMode } from '../models/jitter';
import { RANK_JITTER_MODES, RankJitter } from '../models/lane-durations';
import { BufferLimit } from '../policies/backpressure';
import { quoteValue } from '../base/quote';
import { FlagSpec, ParsedFlags, UsageError } from './args';
import { FaultSpec, formatFaultSpec, parseFaultSpec } from '../transport/fault-spec';
import { PLACEMENT_FLAGS, emulatedStageWork, placedConfig } from './placement-flags';

/** Beyond this the drawn durations overflow (lognormal spreads are exponentiated). */
const MAX_JITTER_SCALE = 100;

/** How the ranks of a TP group draw their message delays (models/lane-durations.ts). */
export const RANK_JITTER_FLAG: FlagSpec = {
  name: 'rank-jitter',
  type: 'string',
  help: "TP > 1: shared = a group's ranks share each message's network delay, times a small per-rank part (the compute jitter's spread); independent = each rank draws its whole delay",
  choices: RANK_JITTER_MODES,
  default: DEFAULTS.rankJitter,
};

/** --buffer-limit, for every job command: N for every stage, or depth (P − s at stage s). */
export const BUFFER_LIMIT_FLAG: FlagSpec = {
  name: 'buffer-limit',
  type: 'string',
  metavar: 'N|depth',
  help: `in-flight forwards per stage before backward-only drain: N, or depth (P-s at stage s, as 1F1B); default ${DEFAULTS.bufferLimit}, depth with --mode async; binding schedules keep their own counts`,
};

/** The --buffer-limit given, or undefined (resolveConfig then picks by mode). */
export function bufferLimitFromFlag(raw: unknown): BufferLimit | undefined {
  if (raw === undefined) return undefined;
  const text = String(raw);
  if (text === 'depth') return 'depth';
  const n = Number(text);
  if (!/^[0-9]+$/.test(text) || !Number.isSafeInteger(n) || n < 1)
    throw new UsageError(`--buffer-limit must be a positive integer or depth, got ${quoteValue(text)}`);
  return n;
}

/** --inject-faults, for every job command (transport/fault-spec.ts). */
export const INJECT_FAULTS_FLAG: FlagSpec = {
  name: 'inject-faults',
  type: 'string',
  metavar: 'SPEC',
  help: 'drop, duplicate, delay and reorder stage-to-stage messages: drop=P,dup=P,delay=P,delay-ms=MS,reorder=P,seed=S (P a probability; lost ones are resent on request, docs/operations.md)',
  default: formatFaultSpec(DEFAULTS.faults),
};

/** --max-restarts of `run` and `train` (job/recovery.ts), defaulting to `n`. */
export function maxRestartsFlag(n: number): FlagSpec {
  return {
    name: 'max-restarts',
    type: 'int',
    metavar: 'N',
    help: 'sync, --transport nats with its own stage processes: restart a lost stage process, or wait for a server given by --nats that went away, and replay the iteration from the last flush, up to N times (0: a loss fails the run); past N the run fails naming every failure',
    default: n,
  };
}

/** The --max-restarts value: an integer from 0 to 1000. */
export function maxRestartsOf(v: unknown, command: string): number {
  if (!Number.isInteger(v) || (v as number) < 0 || (v as number) > 1000)
    throw new UsageError(`${command}: --max-restarts must be an integer from 0 to 1000, got ${String(v)}`);
  return v as number;
}

/** The faults --inject-faults asks for (null: none); their seed defaults to `seed`. */
export function faultsFromFlag(raw: unknown, seed: number): FaultSpec | null {
  return raw === undefined ? DEFAULTS.faults : parseFaultSpec(String(raw), seed);
}

export const JOB_FLAGS: readonly FlagSpec[] = [
  { name: 'stages', type: 'int', metavar: 'P', help: 'pipeline stages', default: DEFAULTS.stages },
  {
    name: 'microbatches',
    type: 'int',
    metavar: 'M',
    help: 'microbatches per iteration',
    default: DEFAULTS.microbatches,
  },
  {
    name: 'chunks',
    type: 'int',
    metavar: 'V',
    help: 'model chunks per stage (interleaved virtual stages)',
    default: DEFAULTS.chunks,
  },
  {
    name: 'policy',
    type: 'string',
    metavar: 'NAME',
    help: 'hint order (bf fb b-priority f-priority bfw), binding schedule (gpipe 1f1b interleaved-1f1b zb-h1), hint:<schedule>, or a policy module path',
    default: DEFAULTS.policy,
  },
  {
    name: 'profile',
    type: 'string',
    metavar: 'NAME|FILE',
    help: 'workload profile: uniform, llm, multimodal, train or a JSON file',
    default: DEFAULTS.profile,
  },
  { name: 'jitter', type: 'string', help: 'duration jitter', choices: JITTER_MODES, default: DEFAULTS.jitter },
  {
    name: 'jitter-scale',
    type: 'number',
    metavar: 'X',
    help: 'multiply the jitter spreads by X',
    default: DEFAULTS.jitterScale,
  },
  {
    name: 'tp',
    type: 'int',
    metavar: 'T',
    help: 'tensor-parallel ranks per stage (each its own stage actor; F and B agreed by the group)',
    default: DEFAULTS.tp,
  },
  {
    name: 'dp',
    type: 'int',
    metavar: 'D',
    help: 'data-parallel replicas of the pipeline (gradients all-reduced at the flush; sync mode only)',
    default: DEFAULTS.dp,
  },
  RANK_JITTER_FLAG,
  BUFFER_LIMIT_FLAG,
  { name: 'seed', type: 'int', metavar: 'S', help: 'seed of the realized durations', default: DEFAULTS.seed },
  {
    name: 'iterations',
    type: 'int',
    metavar: 'I',
    help: 'iterations (each ends with a flush; with --mode async, one stream of I x M microbatches)',
    default: DEFAULTS.iterations,
  },
  {
    name: 'job',
    type: 'string',
    metavar: 'NAME',
    help: 'job name (the subject token baton.<job>.…)',
    default: DEFAULTS.job,
  },
  {
    name: 'mode',
    type: 'string',
    help: 'sync: flush every iteration; async: update after every backward, no flush (M x I microbatches in one stream)',
    choices: ['sync', 'async'],
    default: DEFAULTS.mode,
  },
  INJECT_FAULTS_FLAG,
  ...PLACEMENT_FLAGS,
];

/** Asynchronous mode never flushes: I iterations of M microbatches become one stream of M x I. */
export function asyncStream(cfg: JobConfig): JobConfig {
  return cfg.mode === 'async' ? { ...cfg, microbatches: cfg.microbatches * cfg.iterations, iterations: 1 } : cfg;
}

function positiveInt(flags: ParsedFlags, name: string, key: string): number {
  const v = flags[key] as number;
  if (!Number.isInteger(v) || v < 1) throw new UsageError(`--${name} must be a positive integer, got ${v}`);
  return v;
}

export function jobConfigFromFlags(flags: ParsedFlags): JobConfig {
  const scale = flags.jitterScale as number;
  if (!(scale >= 0 && scale <= MAX_JITTER_SCALE))
    throw new UsageError(`--jitter-scale must be between 0 and ${MAX_JITTER_SCALE}, got ${scale}`);
  const seed = flags.seed as number;
  if (!Number.isInteger(seed) || seed < 0) throw new UsageError(`--seed must be a non-negative integer, got ${seed}`);
  const cfg = resolveConfig({
    job: flags.job as string,
    stages: positiveInt(flags, 'stages', 'stages'),
    microbatches: positiveInt(flags, 'microbatches', 'microbatches'),
    chunks: positiveInt(flags, 'chunks', 'chunks'),
    tp: positiveInt(flags, 'tp', 'tp'),
    dp: positiveInt(flags, 'dp', 'dp'),
    policy: flags.policy as string,
    profile: flags.profile as string,
    jitter: flags.jitter as JitterMode,
    jitterScale: scale,
    rankJitter: flags.rankJitter as RankJitter,
    bufferLimit: bufferLimitFromFlag(flags.bufferLimit),
    seed,
    iterations: positiveInt(flags, 'iterations', 'iterations'),
    mode: flags.mode as 'sync' | 'async',
    faults: faultsFromFlag(flags.injectFaults, seed),
  });
  return placedConfig(flags, cfg, () => emulatedStageWork(cfg));
}

/** The policies `--compare` lists, or undefined without it; it replaces --policy, so the two together are refused. */
export function comparedPolicies(
  flags: ParsedFlags,
  given: ReadonlySet<string>,
  command: string,
): string[] | undefined {
  const compare = flags.compare as string[] | undefined;
  if (compare && given.has('policy'))
    throw new UsageError(`${command}: --compare runs each policy it lists; give --policy or --compare, not both`);
  return compare;
}

/** How much faster a makespan is than the first policy's (two empty runs, of a zero-duration profile, are equally fast). */
export function speedupOver(base: number, ms: number): number {
  return ms === base ? 1 : base / ms;
}
