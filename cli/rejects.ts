// A run that rejected messages (malformed, misrouted, duplicated, stray) still completes
// and counts them in its JSON as `rejected`; the user also hears of them on stderr.

import { JobResult } from '../job/run-local';

export function warnRejects(
  command: string,
  r: JobResult,
  err: (s: string) => void = (s) => process.stderr.write(`${s}\n`),
): void {
  const n = r.totals.rejected;
  if (n === 0) return;
  err(
    `baton ${command}: warning: ${n} message${n === 1 ? '' : 's'} rejected and ignored; first: ${r.rejects.slice(0, 3).join(' | ')}`,
  );
}
