// Workload profiles: what one microbatch costs, layer by layer, for emulated compute.
//
// A profile is a JSON file (built-ins live in models/profiles/) describing the model
// as a list of layer groups. Groups placed `split` form one stack that is cut into
// P*V contiguous virtual stages of equal layer count (see durations.ts); groups placed
// `first` / `last` are indivisible and sit on the first / last virtual stage (embedding,
// LM head and loss). With `depth: "per-stage"` the stack is one physical stage's share
// and the model deepens with P, so stage costs do not depend on P; with `"fixed"` the
// stack is the whole model.
//
// Not modelled: per-microbatch input variation, memory, and backward ratios that differ
// by layer (one ratio for the whole model).

import * as fs from 'fs';
import * as path from 'path';
import { jsonErrorLine } from '../base/json-error';
import { quoteValue } from '../base/quote';
import { RegularFileError, readRegularFile } from '../base/regular-file';
import { InputError } from '../base/errors';

export type LayerPlacement = 'first' | 'split' | 'last';

export interface LayerGroup {
  readonly name: string;
  /** Number of identical layers in the group (1 for `first` / `last` unless given). */
  readonly count: number;
  /** Forward ms of one layer for one microbatch. */
  readonly forwardMs: number;
  readonly placement: LayerPlacement;
  /** Bytes of the activation leaving a cut inside or right after this group; defaults to communication.activationBytes. */
  readonly activationBytes?: number;
}

export interface CommunicationModel {
  /** Fixed cost of one message. */
  readonly latencyMs: number;
  /** Link bandwidth in GB/s (1 GB = 1e9 bytes). */
  readonly bandwidthGBps: number;
  /** Bytes of an activation message (and of the gradient going back over the same cut). */
  readonly activationBytes: number;
}

export interface WorkloadProfile {
  readonly name: string;
  /** Where the profile came from (a file path), quoted in errors. */
  readonly source: string;
  readonly description: string;
  readonly notes: readonly string[];
  readonly depth: 'fixed' | 'per-stage';
  /** Whole backward ms / forward ms. */
  readonly backwardRatio: number;
  /** Share of the whole backward that is W (weight gradient) when B/W is split. */
  readonly weightGradFraction: number;
  readonly communication: CommunicationModel;
  readonly layers: readonly LayerGroup[];
}

export class ProfileError extends InputError {
  override name = 'ProfileError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

export const BUILTIN_PROFILES = ['uniform', 'llm', 'multimodal', 'train'] as const;

/** The directory holding package.json, found by walking up from this file. */
export function packageRoot(from: string = __dirname): string {
  let dir = from;
  for (;;) {
    if (fs.existsSync(path.join(dir, 'package.json'))) return dir;
    const up = path.dirname(dir);
    if (up === dir) throw new ProfileError(`no package.json above ${JSON.stringify(from)}`);
    dir = up;
  }
}

export function builtinProfilePath(name: string): string {
  return path.join(packageRoot(), 'models', 'profiles', `${name}.json`);
}

/** True when loadProfile would read `nameOrPath` as a file rather than as a built-in name. */
export function isProfilePath(nameOrPath: string): boolean {
  return nameOrPath.includes('/') || nameOrPath.includes(path.sep) || nameOrPath.endsWith('.json');
}

/** A built-in name (`uniform`, `llm`, `multimodal`) or a path to a profile JSON file. */
export function loadProfile(nameOrPath: string): WorkloadProfile {
  const looksLikePath = isProfilePath(nameOrPath);
  if (!looksLikePath && !(BUILTIN_PROFILES as readonly string[]).includes(nameOrPath))
    throw new ProfileError(
      `unknown profile ${JSON.stringify(nameOrPath)}: built-ins are ${BUILTIN_PROFILES.join(', ')}; or give a path to a JSON file`,
    );
  const file = looksLikePath ? path.resolve(nameOrPath) : builtinProfilePath(nameOrPath);
  let text: string;
  try {
    text = readRegularFile(file, MAX_PROFILE_BYTES).toString('utf8');
  } catch (cause) {
    if (!(cause instanceof RegularFileError)) throw cause;
    throw new ProfileError(`profile ${JSON.stringify(file)} ${cause.message}`, { cause });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (cause) {
    throw new ProfileError(`${file}: not valid JSON: ${jsonErrorLine(cause)}`, { cause });
  }
  return parseProfile(json, file, path.basename(file, '.json'));
}

/** Bounds on a profile: beyond them durations overflow timers and messages, and partitioning takes minutes. */
export const PROFILE_LIMITS = {
  bytes: 16 * 1024 * 1024,
  layerGroups: 10_000,
  layersPerGroup: 100_000,
  /** The whole model's forward time, Σ count × forwardMs. */
  forwardMs: 1e7,
  backwardRatio: 100,
  /** One message's communication time before jitter: latency + bytes / bandwidth. */
  commMs: 60_000,
  activationBytes: 2 ** 40,
} as const;
const MAX_PROFILE_BYTES = PROFILE_LIMITS.bytes;

const TOP_KEYS = ['description', 'notes', 'depth', 'backwardRatio', 'weightGradFraction', 'communication', 'layers'];
const COMM_KEYS = ['latencyMs', 'bandwidthGBps', 'activationBytes'];
const LAYER_KEYS = ['name', 'count', 'forwardMs', 'placement', 'activationBytes'];

/** Validate parsed JSON into a profile; every error names `source` and the field, and quotes the value. */
export function parseProfile(json: unknown, source: string, name: string): WorkloadProfile {
  const fail = (field: string, want: string, got: unknown): never => {
    throw new ProfileError(`${source}: ${field || 'the profile'} must be ${want}, got ${quoteValue(got)}`);
  };
  const object = (field: string, v: unknown, keys: string[]): Record<string, unknown> => {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return fail(field, 'an object', v);
    const rec = v as Record<string, unknown>;
    for (const k of Object.keys(rec))
      if (!keys.includes(k))
        throw new ProfileError(
          `${source}: unknown field ${JSON.stringify(field ? `${field}.${k}` : k)}; allowed: ${keys.join(', ')}`,
        );
    return rec;
  };
  const num = (
    field: string,
    v: unknown,
    min: number,
    opts: { above?: boolean; max?: number; integer?: boolean } = {},
  ): number => {
    const range = `${opts.above ? '>' : '>='} ${min}${opts.max !== undefined ? ` and <= ${opts.max}` : ''}`;
    const want = opts.integer ? `an integer ${range}` : `a finite number ${range}`;
    if (typeof v !== 'number' || !Number.isFinite(v)) return fail(field, want, v);
    if (opts.integer && !Number.isInteger(v)) return fail(field, want, v);
    if (opts.above ? v <= min : v < min) return fail(field, want, v);
    if (opts.max !== undefined && v > opts.max) return fail(field, want, v);
    return v;
  };
  const str = (field: string, v: unknown): string =>
    typeof v === 'string' && v.trim() !== '' ? v : fail(field, 'a non-empty string', v);

  const top = object('', json, TOP_KEYS);
  const notesRaw = top.notes ?? [];
  if (!Array.isArray(notesRaw)) fail('notes', 'an array of strings', notesRaw);
  const notes = (notesRaw as unknown[]).map((n, i) => str(`notes[${i}]`, n));
  const depth = top.depth;
  if (depth !== 'fixed' && depth !== 'per-stage') fail('depth', '"fixed" or "per-stage"', depth);

  const c = object('communication', top.communication, COMM_KEYS);
  const communication: CommunicationModel = {
    latencyMs: num('communication.latencyMs', c.latencyMs, 0, { max: PROFILE_LIMITS.commMs }),
    bandwidthGBps: num('communication.bandwidthGBps', c.bandwidthGBps, 0, { above: true }),
    activationBytes: num('communication.activationBytes', c.activationBytes, 0, {
      integer: true,
      max: PROFILE_LIMITS.activationBytes,
    }),
  };

  if (!Array.isArray(top.layers) || top.layers.length === 0) fail('layers', 'a non-empty array', top.layers);
  if ((top.layers as unknown[]).length > PROFILE_LIMITS.layerGroups)
    fail('layers', `at most ${PROFILE_LIMITS.layerGroups} groups`, `${(top.layers as unknown[]).length} groups`);
  const layers = (top.layers as unknown[]).map((raw, i): LayerGroup => {
    const f = `layers[${i}]`;
    const l = object(f, raw, LAYER_KEYS);
    const placement = l.placement ?? 'split';
    if (placement !== 'first' && placement !== 'split' && placement !== 'last')
      fail(`${f}.placement`, '"first", "split" or "last"', placement);
    const group: LayerGroup = {
      name: str(`${f}.name`, l.name),
      count:
        l.count === undefined && placement !== 'split'
          ? 1
          : num(`${f}.count`, l.count, 1, { integer: true, max: PROFILE_LIMITS.layersPerGroup }),
      forwardMs: num(`${f}.forwardMs`, l.forwardMs, 0, { max: PROFILE_LIMITS.forwardMs }),
      placement: placement as LayerPlacement,
    };
    return l.activationBytes === undefined
      ? group
      : {
          ...group,
          activationBytes: num(`${f}.activationBytes`, l.activationBytes, 0, {
            integer: true,
            max: PROFILE_LIMITS.activationBytes,
          }),
        };
  });
  const forwardMs = layers.reduce((t, l) => t + l.count * l.forwardMs, 0);
  if (forwardMs > PROFILE_LIMITS.forwardMs)
    fail(
      'layers',
      `at most ${PROFILE_LIMITS.forwardMs} ms of forward time in all (count × forwardMs)`,
      `${forwardMs} ms`,
    );
  // What crosses a cut: the output of a split group (first and last groups never end a stage's slice).
  const largest = Math.max(
    communication.activationBytes,
    ...layers.filter((l) => l.placement === 'split').map((l) => l.activationBytes ?? 0),
  );
  const commMs = communication.latencyMs + largest / (communication.bandwidthGBps * 1e6);
  if (commMs > PROFILE_LIMITS.commMs)
    fail(
      'communication',
      `at most ${PROFILE_LIMITS.commMs} ms per message before jitter (latencyMs + activationBytes / bandwidthGBps)`,
      `${commMs} ms for ${largest} bytes`,
    );
  if (!layers.some((l) => l.placement === 'split'))
    fail(
      'layers',
      'a list with at least one "split" group (the stack cut into stages)',
      layers.map((l) => l.placement),
    );

  return {
    name,
    source,
    description: str('description', top.description),
    notes,
    depth: depth as 'fixed' | 'per-stage',
    backwardRatio: num('backwardRatio', top.backwardRatio, 0, { above: true, max: PROFILE_LIMITS.backwardRatio }),
    weightGradFraction: num('weightGradFraction', top.weightGradFraction, 0, { max: 1 }),
    communication,
    layers,
  };
}
