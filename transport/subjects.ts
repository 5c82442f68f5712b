// Subject naming: baton.<job>.<kind>.<stage>[.<rank>]. A wildcard subscription to
// `baton.<job>.>` sees one whole job, and one permission rule on it fences the job: its
// name claim (baton.<job>.claim) and the subjects of the agents started for it
// (baton.<job>.node.…) lie under it too. Only standalone agents use baton._nodes.…

import { quoteValue } from '../base/quote';
import { MAX_JOB_NAME } from './envelope';
import { TOKEN_RE } from '../base/token';
import { InputError } from '../base/errors';

export type SubjectKind =
  | 'activation'
  | 'gradient'
  | 'data'
  | 'control'
  | 'tp'
  | 'tp-reduce'
  | 'dp-reduce'
  | 'trace'
  | 'report'
  | 'state'
  | 'stats'
  | 'policy'
  | 'resend'
  | 'claim'
  | 'node';

export class SubjectError extends InputError {
  override name = 'SubjectError';
}

export function checkJobName(job: unknown): string {
  if (typeof job !== 'string' || !TOKEN_RE.test(job) || job.length > MAX_JOB_NAME)
    throw new SubjectError(
      `job name ${quoteValue(job)} must be a string matching ${TOKEN_RE} of at most ${MAX_JOB_NAME} characters (it is a NATS subject token)`,
    );
  // baton._nodes.… are the standalone node agents' subjects.
  if (job.startsWith('_'))
    throw new SubjectError(
      `job name ${quoteValue(job)}: names starting with _ are reserved for Baton's own subjects (baton._nodes)`,
    );
  return job;
}

export function subject(job: string, kind: SubjectKind, stage?: number | string, rank?: number): string {
  let s = `baton.${job}.${kind}`;
  if (stage !== undefined) s += `.${stage}`;
  if (rank !== undefined) s += `.${rank}`;
  return s;
}

export function jobWildcard(job: string): string {
  return `baton.${job}.>`;
}

/** Parse a Baton subject back into its parts, or null when it is not one. */
export function parseSubject(s: string): { job: string; kind: string; stage?: string; rank?: string } | null {
  const parts = s.split('.');
  if (parts.length < 3 || parts[0] !== 'baton') return null;
  return { job: parts[1], kind: parts[2], stage: parts[3], rank: parts[4] };
}
