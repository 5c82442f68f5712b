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
// Reading one is here; validating its JSON is profile-parse.ts.
//
// Not modelled: per-microbatch input variation, memory, and backward ratios that differ
// by layer (one ratio for the whole model).

import * as fs from 'fs';
import * as path from 'path';
import { jsonErrorLine } from '../base/json-error';
import { RegularFileError, readRegularFile } from '../base/regular-file';
import { PROFILE_LIMITS, ProfileError, parseProfile } from './profile-parse';

export { PROFILE_LIMITS, ProfileError, parseProfile };

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

const MAX_PROFILE_BYTES = PROFILE_LIMITS.bytes;
