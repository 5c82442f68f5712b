// Validating a parsed profile JSON into a WorkloadProfile (see profile.ts for what a
// profile describes): every error names the source and the field and quotes the value,
// and the bounds keep durations within timers and messages.

import { quoteValue } from '../base/quote';
import { InputError } from '../base/errors';
import type { CommunicationModel, LayerGroup, LayerPlacement, WorkloadProfile } from './profile';

export class ProfileError extends InputError {
  override name = 'ProfileError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
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

const TOP_KEYS = ['description', 'notes', 'depth', 'backwardRatio', 'weightGradFraction', 'communication', 'layers'];
const COMM_KEYS = ['latencyMs', 'bandwidthGBps', 'activationBytes'];
const LAYER_KEYS = ['name', 'count', 'forwardMs', 'placement', 'activationBytes'];

/** Validate parsed JSON into a profile; every error names `source` and the field, and quotes the value. */
export function parseProfile(json: unknown, source: string, name: string): WorkloadProfile {
  const f = fieldChecks(source);
  const top = f.object('', json, TOP_KEYS);
  const notesRaw = top.notes ?? [];
  if (!Array.isArray(notesRaw)) f.fail('notes', 'an array of strings', notesRaw);
  const notes = (notesRaw as unknown[]).map((n, i) => f.str(`notes[${i}]`, n));
  const depth = top.depth;
  if (depth !== 'fixed' && depth !== 'per-stage') f.fail('depth', '"fixed" or "per-stage"', depth);
  const communication = parseCommunication(f, top.communication);
  if (!Array.isArray(top.layers) || top.layers.length === 0) f.fail('layers', 'a non-empty array', top.layers);
  if ((top.layers as unknown[]).length > PROFILE_LIMITS.layerGroups)
    f.fail('layers', `at most ${PROFILE_LIMITS.layerGroups} groups`, `${(top.layers as unknown[]).length} groups`);
  const layers = (top.layers as unknown[]).map((raw, i) => parseLayerGroup(f, raw, i));
  checkTotals(f, layers, communication);
  return {
    name,
    source,
    description: f.str('description', top.description),
    notes,
    depth: depth as 'fixed' | 'per-stage',
    backwardRatio: f.num('backwardRatio', top.backwardRatio, 0, { above: true, max: PROFILE_LIMITS.backwardRatio }),
    weightGradFraction: f.num('weightGradFraction', top.weightGradFraction, 0, { max: 1 }),
    communication,
    layers,
  };
}

type FieldChecks = ReturnType<typeof fieldChecks>;

/** Checks of one field each, whose errors name `source`. */
function fieldChecks(source: string) {
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
  return { fail, object, num, str };
}

function parseCommunication(f: FieldChecks, raw: unknown): CommunicationModel {
  const c = f.object('communication', raw, COMM_KEYS);
  return {
    latencyMs: f.num('communication.latencyMs', c.latencyMs, 0, { max: PROFILE_LIMITS.commMs }),
    bandwidthGBps: f.num('communication.bandwidthGBps', c.bandwidthGBps, 0, { above: true }),
    activationBytes: f.num('communication.activationBytes', c.activationBytes, 0, {
      integer: true,
      max: PROFILE_LIMITS.activationBytes,
    }),
  };
}

function parseLayerGroup(f: FieldChecks, raw: unknown, i: number): LayerGroup {
  const at = `layers[${i}]`;
  const l = f.object(at, raw, LAYER_KEYS);
  const placement = l.placement ?? 'split';
  if (placement !== 'first' && placement !== 'split' && placement !== 'last')
    f.fail(`${at}.placement`, '"first", "split" or "last"', placement);
  const group: LayerGroup = {
    name: f.str(`${at}.name`, l.name),
    count:
      l.count === undefined && placement !== 'split'
        ? 1
        : f.num(`${at}.count`, l.count, 1, { integer: true, max: PROFILE_LIMITS.layersPerGroup }),
    forwardMs: f.num(`${at}.forwardMs`, l.forwardMs, 0, { max: PROFILE_LIMITS.forwardMs }),
    placement: placement as LayerPlacement,
  };
  return l.activationBytes === undefined
    ? group
    : {
        ...group,
        activationBytes: f.num(`${at}.activationBytes`, l.activationBytes, 0, {
          integer: true,
          max: PROFILE_LIMITS.activationBytes,
        }),
      };
}

/** The whole model's forward time, the slowest message, and a stack to cut. */
function checkTotals(f: FieldChecks, layers: readonly LayerGroup[], communication: CommunicationModel): void {
  const forwardMs = layers.reduce((t, l) => t + l.count * l.forwardMs, 0);
  if (forwardMs > PROFILE_LIMITS.forwardMs)
    f.fail(
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
    f.fail(
      'communication',
      `at most ${PROFILE_LIMITS.commMs} ms per message before jitter (latencyMs + activationBytes / bandwidthGBps)`,
      `${commMs} ms for ${largest} bytes`,
    );
  if (!layers.some((l) => l.placement === 'split'))
    f.fail(
      'layers',
      'a list with at least one "split" group (the stack cut into stages)',
      layers.map((l) => l.placement),
    );
}
