// What a fault-injecting bus (fault-bus.ts) does to the messages it carries, and its text
// form, the value of `--inject-faults`: `drop=0.01,dup=0.01,delay=0.05,delay-ms=20,reorder=0.02,seed=7`.

import { InputError } from '../base/errors';
import { quoteValue } from '../base/quote';

export interface FaultSpec {
  /** Probability that a message is not delivered. */
  readonly drop: number;
  /** Probability that a message is delivered twice. */
  readonly dup: number;
  /** Probability that a message is delivered up to `delayMs` late (drawn uniformly). */
  readonly delay: number;
  /** Longest injected delay, ms. */
  readonly delayMs: number;
  /** Probability that a message is held back and delivered after the next one on its subject. */
  readonly reorder: number;
  /** Seed of the draws (each stage draws from seed + its stage number). */
  readonly seed: number;
}

export class FaultSpecError extends InputError {
  override name = 'FaultSpecError';
}

export const NO_FAULTS: FaultSpec = { drop: 0, dup: 0, delay: 0, delayMs: 20, reorder: 0, seed: 1 };

const PROBABILITIES = ['drop', 'dup', 'delay', 'reorder'] as const;
const LONGEST_DELAY_MS = 60_000;

/** True when the spec changes anything (a bus without faults is not wrapped). */
export function injectsFaults(f: FaultSpec | null): f is FaultSpec {
  return f !== null && (f.drop > 0 || f.dup > 0 || f.delay > 0 || f.reorder > 0);
}

/** True when messages can go missing (dropped, or held longer than a receiver waits): the resend path is needed. */
export function losesMessages(f: FaultSpec | null): boolean {
  return f !== null && f.drop > 0;
}

/** Why `f` (from a job config off the network) is not a fault spec, or null. */
export function faultSpecProblem(f: unknown): string | null {
  if (f === null) return null;
  if (typeof f !== 'object' || Array.isArray(f)) return 'null or a map of drop, dup, delay, delayMs, reorder, seed';
  const o = f as Record<string, unknown>;
  for (const k of Object.keys(o))
    if (![...PROBABILITIES, 'delayMs', 'seed'].includes(k)) return `no field ${quoteValue(k, 40)}`;
  for (const k of PROBABILITIES) {
    const p = o[k];
    if (typeof p !== 'number' || !(p >= 0 && p <= 1)) return `${k}: a probability from 0 to 1`;
  }
  if (typeof o.delayMs !== 'number' || !(o.delayMs >= 0 && o.delayMs <= LONGEST_DELAY_MS))
    return `delayMs: a number of ms from 0 to ${LONGEST_DELAY_MS}`;
  if (!Number.isSafeInteger(o.seed)) return 'seed: an integer';
  return null;
}

const NAMES: Record<string, keyof FaultSpec> = {
  drop: 'drop',
  dup: 'dup',
  delay: 'delay',
  'delay-ms': 'delayMs',
  reorder: 'reorder',
  seed: 'seed',
};

/** Parse `--inject-faults` text (`none` or an empty string: no faults); `seed` defaults to `defaultSeed`. */
export function parseFaultSpec(text: string, defaultSeed: number): FaultSpec | null {
  const t = text.trim();
  if (t === '' || t === 'none') return null;
  const spec: Record<string, number> = { ...NO_FAULTS, seed: defaultSeed };
  for (const part of t.split(',')) {
    const m = /^\s*([a-z-]+)\s*=\s*([^\s=]+)\s*$/.exec(part);
    const name = m ? NAMES[m[1]] : undefined;
    if (!m || name === undefined)
      throw new FaultSpecError(
        `--inject-faults: ${quoteValue(part, 40)} is not NAME=VALUE with NAME one of ${Object.keys(NAMES).join(', ')}`,
      );
    const value = Number(m[2]);
    if (m[2] === '' || !Number.isFinite(value))
      throw new FaultSpecError(`--inject-faults: ${m[1]} must be a number, got ${quoteValue(m[2], 40)}`);
    spec[name] = value;
  }
  const problem = faultSpecProblem(spec);
  if (problem !== null) throw new FaultSpecError(`--inject-faults: ${problem.replace('delayMs', 'delay-ms')}`);
  return spec as unknown as FaultSpec;
}

/** The spec as `--inject-faults` writes it. */
export function formatFaultSpec(f: FaultSpec | null): string {
  if (!injectsFaults(f)) return 'none';
  return `drop=${f.drop},dup=${f.dup},delay=${f.delay},delay-ms=${f.delayMs},reorder=${f.reorder},seed=${f.seed}`;
}
