// How a distributed launch reads the ends of its job from the node agents' answers: the
// events their finish answers promise, and why a job that made no progress stalled.

import { quoteValue } from '../base/quote';
import { DeadlockError } from '../checks/deadlock';
import { BatonEvent } from '../stage/events';
import { StageStatus } from '../stage/stage-state';
import { Reply, pollUntil } from './reply-box';
import { TraceCollector } from './trace-collector';
import { JobError } from './wire-stage';

/** The events per stage the nodes' `finished` answers count; throws on actor failures or a lost trace they report. */
export function expectedEvents(finished: readonly Reply[]): Map<number, number> {
  const expected = new Map<number, number>();
  const failures: string[] = [];
  const lost: string[] = [];
  for (const r of finished) {
    // The stage's ranks and replicas may be on several nodes: their counts add up.
    for (const [s, n] of Object.entries(r.events as Record<string, number>))
      expected.set(Number(s), (expected.get(Number(s)) ?? 0) + n);
    // Loops, not push(...list): a peer's list may be longer than a call takes arguments.
    for (const f of (r.failures as string[] | undefined) ?? []) failures.push(f);
    for (const l of (r.lostTrace as string[] | undefined) ?? []) lost.push(`node ${r.name}: ${l}`);
  }
  if (failures.length > 0) throw new JobError(`actor failures on the nodes: ${failures.slice(0, 5).join('; ')}`);
  if (lost.length > 0) throw new JobError(`the trace is incomplete: ${lost.slice(0, 3).join('; ')}`);
  return expected;
}

export interface StallAnswers {
  /** What the nodes answered after they were asked for their stages' statuses. */
  readonly answers: readonly Reply[];
  /** Nodes that gave no status, and of them those that said nothing at all since they were asked. */
  readonly silent: readonly string[];
  readonly gone: readonly string[];
  readonly stallTimeoutMs: number;
  readonly recent: readonly BatonEvent[];
  readonly elapsedMs: number;
}

/**
 * Why the job made no progress: nodes gone or hung, or else a deadlock with every stage's
 * status. A node that answered something else (an error: its status did not fit in a
 * message, say) is alive, and the deadlock report stands, naming what it said.
 */
export function stallErrorOf(a: StallAnswers): Error {
  if (a.gone.length > 0)
    return new JobError(
      `node(s) ${a.gone.join(', ')} answered nothing within 5 s after the job made no progress for ${a.stallTimeoutMs} ms: gone or hung`,
    );
  const statuses = a.answers.filter((r) => r.verb === 'status').flatMap((r) => r.statuses as StageStatus[]);
  const err = new DeadlockError(statuses, [...a.recent], a.elapsedMs);
  if (a.silent.length > 0)
    err.message += `\n  node(s) ${a.silent.join(', ')} answered but gave no status: ${
      a.answers
        .filter((r) => a.silent.includes(String(r.name)) && r.verb === 'error')
        .map((r) => quoteValue(r.message))
        .join('; ') || 'no reason given'
    }`;
  return err;
}

/**
 * Resolves once every event the nodes' finish answers count (`expected`, per stage) has
 * arrived at `trace`; fails when they do not within `timeoutMs` or a trace batch was malformed.
 */
export async function wholeTrace(
  trace: TraceCollector,
  expected: ReadonlyMap<number, number>,
  timeoutMs: number,
  over: () => boolean,
): Promise<void> {
  const { received, rejects } = trace;
  await pollUntil(() => [...expected].every(([s, n]) => (received.get(s) ?? 0) >= n), timeoutMs, over).catch(() => {
    throw new JobError(
      `trace incomplete: expected ${JSON.stringify(Object.fromEntries(expected))} events per stage, received ${JSON.stringify(Object.fromEntries(received))}`,
    );
  });
  if (rejects.count > 0)
    throw new JobError(`malformed trace batches (${rejects.count} problems): ${rejects.first.slice(0, 3).join('; ')}`);
}
