// The job file's schema (`--config job.yaml` of sim, run and train): every key the file may
// hold, grouped in sections, each key standing for one flag. A key is its flag's name with
// `_` for `-`, except the key that names its section's main choice, `name` (policy.name is
// --policy, model.name is --model, profile.name is --profile, transport.name is --transport).
// Types, ranges and allowed values are checked here with valibot; what a command does with a
// value (and the checks that need other values) is left to the command, as for its flags.
//
// To add a flag to the job file, add its key to a section here (test/job-file.test.ts fails
// for a flag of sim, run or train that has no key and is not in COMMAND_ONLY_FLAGS).

import * as v from 'valibot';
import { JITTER_MODES } from '../models/jitter';
import { RANK_JITTER_MODES } from '../models/lane-durations';
import { BACKWARD_MODES, CONSISTENCY_POLICIES } from '../actors/param-store';

export type JobCommand = 'sim' | 'run' | 'train';

/** Flags that say what to print or do with a run, not what the run is: never in a job file. */
export const COMMAND_ONLY_FLAGS: readonly string[] = [
  'config',
  'print-config',
  'json',
  'help',
  'compare',
  'reference',
  'reference-anneal',
  'trace',
  'gantt',
  'resume',
  'report',
  'metrics',
  'plot',
  'quiet',
];

const int = (min: number) => {
  const want = `an integer >= ${min}`;
  return v.pipe(v.number(want), v.integer(want), v.safeInteger(want), v.minValue(min, want));
};
const num = (min: number) => {
  const want = `a finite number >= ${min}`;
  return v.pipe(v.number(want), v.finite(want), v.minValue(min, want));
};
const text = v.pipe(v.string('a string'), v.minLength(1, 'a non-empty string'));
const flag = v.boolean('true or false');
const oneOf = <T extends string>(values: readonly T[]) => v.picklist(values, `one of ${values.join(', ')}`);
const names = v.pipe(v.array(text, 'a list of names'), v.minLength(1, 'a list of at least one name'));
const speeds = v.pipe(
  v.array(v.pipe(v.number('a positive number'), v.finite('a positive number'), v.gtValue(0, 'a positive number'))),
  v.minLength(1, 'a list of at least one speed'),
);
const STAGE_KEY = v.pipe(v.string(), v.regex(/^(0|[1-9][0-9]{0,5})$/, 'a stage number'));

/** One key: the flag it stands for (by command, where a command names it otherwise) and its schema. */
export interface JobFileKey<S extends v.GenericSchema = v.GenericSchema> {
  readonly flag: string;
  readonly flagOf?: Partial<Record<JobCommand, string>>;
  readonly schema: S;
  /** The file's value as the flag's text, where it is not String(value) (a map, a list of numbers). */
  readonly toFlag?: (value: never) => string | string[];
  /** The flag's value as the file writes it, where it is not the value itself. */
  readonly toFile?: (value: string | string[]) => unknown;
}
const key = <S extends v.GenericSchema>(
  flag: string,
  schema: S,
  more: Omit<JobFileKey, 'flag' | 'schema'> = {},
): JobFileKey<S> => ({ flag, schema, ...more });

/** --placement's text, `auto` or `0=a,1=b`, and the file's form of it, `auto` or {0: a, 1: b}. */
const placementToFlag = (p: 'auto' | Record<string, string>): string =>
  p === 'auto'
    ? p
    : Object.entries(p)
        .map(([stage, node]) => `${stage}=${node}`)
        .join(',');
const placementToFile = (text: string | string[]): unknown =>
  text === 'auto'
    ? text
    : Object.fromEntries(
        String(text)
          .split(',')
          .map((pair) => pair.split('=', 2) as [string, string]),
      );
const bufferLimitToFile = (text: string | string[]): unknown => (text === 'depth' ? text : Number(text));

/** The job file's sections and keys. */
export const JOB_FILE_KEYS = {
  shape: {
    stages: key('stages', int(1)),
    microbatches: key('microbatches', int(1)),
    chunks: key('chunks', int(1)),
    iterations: key('iterations', int(1)),
    warmup_iterations: key('warmup-iterations', int(0)),
    mode: key('mode', oneOf(['sync', 'async'])),
    tp: key('tp', int(1)),
    dp: key('dp', int(1)),
  },
  policy: {
    name: key('policy', text),
    buffer_limit: key('buffer-limit', v.union([int(1), v.literal('depth')], 'an integer >= 1 or "depth"'), {
      toFile: bufferLimitToFile,
    }),
  },
  profile: {
    name: key('profile', text),
    jitter: key('jitter', oneOf(JITTER_MODES)),
    jitter_scale: key('jitter-scale', num(0)),
    rank_jitter: key('rank-jitter', oneOf(RANK_JITTER_MODES)),
    // The seed of the realized durations and delays: --seed of sim and run, --jitter-seed of train.
    seed: key('seed', int(0), { flagOf: { train: 'jitter-seed' } }),
  },
  swaps: {
    // Scripted swaps as --swap-at writes them (it=2:bf,it=5:hint:1f1b); empty: none.
    swap_at: key('swap-at', v.string('a swap schedule, it=N:POLICY,...')),
    swap_modules: key(
      'swap-modules',
      v.union([v.string(), v.array(text)], 'a module path, paths joined by commas, or a list of them'),
      {
        toFlag: (x: string | string[]) => [x].flat().join(','),
        toFile: (text) =>
          String(text)
            .split(',')
            .map((m) => m.trim())
            .filter((m) => m !== ''),
      },
    ),
  },
  model: {
    name: key('model', oneOf(['gpt', 'mlp'])),
    data: key('data', text),
    microbatch_size: key('microbatch-size', int(1)),
    seq: key('seq', int(1)),
    layers: key('layers', int(1)),
    width: key('width', int(1)),
    heads: key('heads', int(1)),
    seed: key('', int(0), { flagOf: { train: 'seed' } }),
  },
  training: {
    lr: key('lr', num(0)),
    warmup: key('warmup', int(0)),
    val_batches: key('val-batches', int(1)),
    checkpoint: key('checkpoint', text),
    checkpoint_every: key('checkpoint-every', int(0)),
    clock: key('clock', oneOf(['real', 'virtual'])),
    backend: key('backend', text),
    threads: key('threads', int(1)),
  },
  async: {
    consistency: key('consistency', oneOf(CONSISTENCY_POLICIES)),
    alpha: key('alpha', num(0)),
    beta1: key('beta1', num(0)),
    lrd: key('lrd', flag),
    pipemare_damping: key('pipemare-damping', flag),
    backward: key('backward', oneOf(BACKWARD_MODES)),
    control_stages: key('control-stages', int(1)),
    snapshot_every: key('snapshot-every', int(0)),
  },
  transport: {
    name: key('transport', oneOf(['nats', 'local'])),
    nats: key('nats', text),
    processes: key('processes', oneOf(['per-stage', 'single'])),
    stall_timeout: key('stall-timeout', int(1)),
    max_restarts: key('max-restarts', int(0)),
    state_every: key('state-every', int(0)),
    // The path of the job's key file (--key-file), never the key itself.
    key_file: key('key-file', text),
    // Paths of the NATS server's TLS files and of a credentials file, never their contents.
    tls_ca: key('tls-ca', text),
    tls_cert: key('tls-cert', text),
    tls_key: key('tls-key', text),
    creds: key('creds', text),
  },
  nodes: {
    names: key('nodes', names),
    // The path of the agents' key file (baton auth key), never the key itself.
    key_file: key('node-key-file', text),
    // --require k=v,… as a map {k: v}.
    require: key('require', v.record(v.pipe(v.string(), v.regex(/^[A-Za-z0-9_-]+$/, 'a tag name')), text), {
      toFlag: (m: Record<string, string>) => Object.entries(m).map(([k, x]) => `${k}=${x}`),
      toFile: (xs) =>
        Object.fromEntries([xs].flat().map((p) => [p.slice(0, p.indexOf('=')), p.slice(p.indexOf('=') + 1)])),
    }),
    speeds: key('node-speeds', speeds, {
      toFlag: (xs: number[]) => xs.map(String),
      toFile: (xs) => [xs].flat().map(Number),
    }),
  },
} as const;

/** Keys outside any section. */
export const JOB_FILE_TOP_KEYS = {
  job: key('job', text),
  inject_faults: key('inject-faults', text),
  partition: key('partition', oneOf(['uniform', 'speed'])),
  placement: key(
    'placement',
    v.union(
      [v.literal('auto'), v.record(STAGE_KEY, text)],
      'auto or a map of stage number to node name ({0: node0, 1: node1, ...})',
    ),
    { toFlag: placementToFlag, toFile: placementToFile },
  ),
} as const;

type Section<T> = { [K in keyof T]: T[K] extends JobFileKey<infer S> ? v.OptionalSchema<S, undefined> : never };
const optionalEntries = <T extends Record<string, JobFileKey>>(keys: T): Section<T> =>
  Object.fromEntries(Object.entries(keys).map(([k, x]) => [k, v.optional(x.schema)])) as Section<T>;
const sectionSchema = <T extends Record<string, JobFileKey>>(keys: T) =>
  v.strictObject(optionalEntries(keys), 'a map of keys');

const SECTIONS = Object.fromEntries(
  Object.entries(JOB_FILE_KEYS).map(([name, keys]) => [name, v.optional(sectionSchema(keys))]),
) as {
  [K in keyof typeof JOB_FILE_KEYS]: v.OptionalSchema<
    ReturnType<typeof sectionSchema<(typeof JOB_FILE_KEYS)[K]>>,
    undefined
  >;
};

/** The whole file: a map of sections and top keys, every one optional, nothing else. */
export const JOB_FILE_SCHEMA = v.strictObject({ ...optionalEntries(JOB_FILE_TOP_KEYS), ...SECTIONS }, 'a map of keys');

/** A job file as the schema types it. */
export type JobFile = v.InferOutput<typeof JOB_FILE_SCHEMA>;

/** Every key with its path (`shape.stages`, `job`), the flag it stands for in `command` (none: not a key of it). */
export function keysOf(command: JobCommand): { path: string[]; flag: string; key: JobFileKey }[] {
  const out: { path: string[]; flag: string; key: JobFileKey }[] = [];
  const add = (path: string[], k: JobFileKey) => out.push({ path, flag: k.flagOf?.[command] ?? k.flag, key: k });
  add(['job'], JOB_FILE_TOP_KEYS.job);
  for (const [section, keys] of Object.entries(JOB_FILE_KEYS))
    for (const [name, k] of Object.entries(keys as Record<string, JobFileKey>)) add([section, name], k);
  for (const [name, k] of Object.entries(JOB_FILE_TOP_KEYS)) if (name !== 'job') add([name], k);
  return out;
}
