// One entry of --compare: a policy, optionally with its own buffer limit after an @
// (`bf@depth`, `bf@8`), so a comparison can hold readiness-first at 1F1B's memory beside
// its default; and what the comparison tables say about memory and their terms.

import { JobConfig } from '../job/config';
import { bufferLimitFromFlag } from './job-flags';
import { UsageError } from './args';

const LIMIT_SUFFIX = /^(.+)@(depth|[0-9]+)$/;

/** The job config of one compared entry: its policy and, after an @, its buffer limit. */
export function comparedConfig(cfg: JobConfig, entry: string): JobConfig {
  const m = LIMIT_SUFFIX.exec(entry);
  if (!m) return { ...cfg, policy: entry };
  try {
    return { ...cfg, policy: m[1], bufferLimit: bufferLimitFromFlag(m[2])! };
  } catch (err) {
    throw new UsageError(`--compare ${entry}: ${(err as Error).message}`);
  }
}

/** A row's name in a comparison: the policy, and the buffer limit when the entry gave one. */
export function entryLabel(entry: string): string {
  const m = LIMIT_SUFFIX.exec(entry);
  return m ? `${m[1]} @${m[2]}` : entry;
}

/** Per-stage counts, stage 0 first, as a table shows them. */
export const perStage = (xs: readonly number[]): string => xs.join(',');

const EFFICIENCY_TERM = 'efficiency = lower bound / makespan (1: provably optimal); ';
const OTHER_TERMS = [
  'bubble = share of stage time idle in the iteration, 1 - busy / (P x makespan)',
  'peak in-flight = most forwards whose activations a stage held at once (its memory), stage 0 first; cap = the most its policy and buffer limit allow',
  "(a binding schedule keeps its own counts: its buffer limit reads 'schedule')",
];

/** What the comparison tables' columns mean, printed under them. */
export const TABLE_TERMS = EFFICIENCY_TERM + OTHER_TERMS.join('\n');

/** The same under a table whose reference note (RATIO_NOTE) already says what efficiency is. */
export const TERMS_BESIDE_REFERENCE = OTHER_TERMS.join('\n');

/** The buffer-limit cell: the limit, or 'schedule' for a binding schedule, which keeps its own counts. */
export const limitCell = (limit: unknown, binding: boolean): string => (binding ? 'schedule' : String(limit));
