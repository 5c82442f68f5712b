// Learning-rate schedule: linear warmup to the peak, then cosine decay to a floor
// (0.1 × peak in the FRESCO runs), constant at the floor after the horizon.
//
// `step` counts optimizer steps from 1 like PyTorch's `state['step']` (the lr used by
// the t-th update is lrAt(s, t)): lr(t) = peak·t/W for t ≤ W, then
// floor + ½(peak − floor)(1 + cos(π·(t−W)/(T−W))) up to T, then floor. lr(0) = 0 when W > 0;
// with W = 0 the schedule starts at the peak.

export interface LrSchedule {
  /** Peak learning rate reached at the end of warmup. */
  readonly peak: number;
  /** Warmup steps W (0: start at the peak). */
  readonly warmupSteps: number;
  /** Horizon T ≥ W at which the cosine reaches the floor. */
  readonly totalSteps: number;
  /** Floor as a fraction of the peak, default 0.1. */
  readonly minRatio?: number;
}

export class ScheduleError extends Error {
  override name = 'ScheduleError';
}

export function checkSchedule(s: LrSchedule): void {
  const bad = (what: string, x: number) => new ScheduleError(`lr schedule: ${what}, got ${x}`);
  if (!(Number.isFinite(s.peak) && s.peak >= 0)) throw bad('peak must be a finite number ≥ 0', s.peak);
  if (!(Number.isInteger(s.warmupSteps) && s.warmupSteps >= 0))
    throw bad('warmupSteps must be an integer ≥ 0', s.warmupSteps);
  if (!(Number.isInteger(s.totalSteps) && s.totalSteps >= s.warmupSteps)) {
    throw bad(`totalSteps must be an integer ≥ warmupSteps (${s.warmupSteps})`, s.totalSteps);
  }
  const r = s.minRatio ?? 0.1;
  if (!(r >= 0 && r <= 1)) throw bad('minRatio must be in [0, 1]', r);
}

export function lrAt(s: LrSchedule, step: number): number {
  checkSchedule(s);
  if (!(Number.isInteger(step) && step >= 0))
    throw new ScheduleError(`lr schedule: step must be an integer ≥ 0, got ${step}`);
  const floor = s.peak * (s.minRatio ?? 0.1);
  if (step <= s.warmupSteps) return s.warmupSteps === 0 ? s.peak : (s.peak * step) / s.warmupSteps;
  if (step >= s.totalSteps) return floor;
  const progress = (step - s.warmupSteps) / (s.totalSteps - s.warmupSteps);
  return floor + 0.5 * (s.peak - floor) * (1 + Math.cos(Math.PI * progress));
}
