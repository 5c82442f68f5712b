// The text form of a scripted swap schedule, `--swap-at "it=2:bf,it=5:hint:1f1b"`: at the
// start of iteration N, swap the arbitration policy to NAME (a built-in name or a module
// path; a module path cannot contain a comma). Parse errors quote the input and the grammar.

import { InputError } from '../base/errors';

export interface ScheduledSwap {
  readonly iteration: number;
  readonly policy: string;
}

export class SwapScheduleError extends InputError {
  override name = 'SwapScheduleError';
}

export const SWAP_SCHEDULE_GRAMMAR = 'it=<iteration>:<policy>[,it=<iteration>:<policy>…]';

export function parseSwapSchedule(text: string): ScheduledSwap[] {
  if (text.trim() === '') return [];
  const out: ScheduledSwap[] = [];
  for (const raw of text.split(',')) {
    const part = raw.trim();
    const m = /^it=(0|[1-9][0-9]{0,8}):(.+)$/.exec(part);
    if (!m)
      throw new SwapScheduleError(
        `--swap-at: ${JSON.stringify(part)} in ${JSON.stringify(text)} is not ${SWAP_SCHEDULE_GRAMMAR}`,
      );
    const iteration = Number(m[1]);
    if (out.length > 0 && iteration < out[out.length - 1].iteration)
      throw new SwapScheduleError(
        `--swap-at: iterations must not decrease, got it=${iteration} after it=${out[out.length - 1].iteration} in ${JSON.stringify(text)}`,
      );
    out.push({ iteration, policy: m[2].trim() });
  }
  return out;
}
