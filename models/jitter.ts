// Runtime jitter as lognormal multipliers with median 1, sized from RRFP §2.2: the
// normalized spread (p95 − p5) / p50 measured over 300 repeated 1F1B runs is 0.73 for
// computation and 58.74 for communication.
//
// For m = exp(σ z), z ~ N(0, 1): p50 = 1 and p95, p5 = exp(±z95 σ), so the spread is
// exp(z95 σ) − exp(−z95 σ) = 2 sinh(z95 σ) and σ = asinh(spread / 2) / z95.
//
// What this does not model: the paper's communication spread has an interquartile part
// (50.80) almost as wide as its 5–95 part, i.e. a bimodal "fast or stalled" shape; a
// lognormal matched on p5/p95 has a much narrower middle (IQR spread ~5.1) and a long
// upper tail (mean ~21x the median). Jitter is independent across keys: no correlated
// slow-downs of a whole stage or link.
import { InputError } from '../base/errors';

export type JitterMode = 'none' | 'compute' | 'paper';

export const JITTER_MODES: readonly JitterMode[] = ['none', 'compute', 'paper'];

/** (p95 − p5) / p50 from RRFP §2.2. */
export const PAPER_SPREAD = { compute: 0.73, communication: 58.74 } as const;

/** Φ⁻¹(0.95). */
export const Z95 = 1.6448536269514722;

export class JitterError extends InputError {
  override name = 'JitterError';
}

/** σ of a median-1 lognormal whose (p95 − p5) / p50 equals `spread`. */
export function sigmaForSpread(spread: number): number {
  if (!Number.isFinite(spread) || spread < 0)
    throw new JitterError(`spread must be a finite number >= 0, got ${JSON.stringify(spread)}`);
  return Math.asinh(spread / 2) / Z95;
}

/** (p95 − p5) / p50 of a median-1 lognormal with this σ. */
export function spreadForSigma(sigma: number): number {
  return 2 * Math.sinh(Z95 * sigma);
}

export interface JitterSigmas {
  readonly compute: number;
  readonly communication: number;
}

/** The σ for compute and communication under `mode`; `scale` multiplies the target spreads (0 = no jitter). */
export function jitterSigmas(mode: JitterMode, scale = 1): JitterSigmas {
  if (!JITTER_MODES.includes(mode))
    throw new JitterError(`jitter must be one of ${JITTER_MODES.join(', ')}, got ${JSON.stringify(mode)}`);
  if (!Number.isFinite(scale) || scale < 0)
    throw new JitterError(`jitterScale must be a finite number >= 0, got ${JSON.stringify(scale)}`);
  const compute = mode === 'none' ? 0 : sigmaForSpread(PAPER_SPREAD.compute * scale);
  const communication = mode === 'paper' ? sigmaForSpread(PAPER_SPREAD.communication * scale) : 0;
  return { compute, communication };
}

/** The multiplier for a standard normal draw `z`. */
export function lognormalMultiplier(sigma: number, z: number): number {
  return sigma === 0 ? 1 : Math.exp(sigma * z);
}
