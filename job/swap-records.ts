// A run's policy swaps as its JSON reports them (`swaps`), from the policy actor's log
// (who asked, when, from, to) and the stages' policy-swap events (where each stage
// adopted it); and the check of a `--swap-at` schedule before a job starts.

import { HintPolicy } from '../policies/hint';
import { PipelineShape } from '../policies/task';
import { resolvePolicy } from '../policies/registry';
import { decideSwap, wideJobSwapProblem } from '../policies/swap-rules';
import { BatonEvent, PolicySwapEvent } from '../stage/events';
import { SwapLogEntry } from '../actors/policy-actor';
import { JobConfig } from './config';
import { SwapOptions, SwapRefusedError } from './policy-control';

export interface SwapRecord {
  swap: number;
  what: 'arbitration' | 'consistency';
  by: string;
  requested_at: string;
  /** When the request came, ms from the first iteration's start (the policy actor's clock). */
  requested_ms: number;
  from: string;
  to: string;
  at_iteration: number | null;
  /** Request -> last stage's ack at the policy actor, ms (null: not every stage adopted it). */
  latency_ms: number | null;
  /** Per stage: the iteration and the task count (tasks it had dispatched) at which it adopted the swap. */
  adopted: { stage: number; iteration: number; tasks: number; t_ms: number }[];
}

export function swapRecords(log: readonly SwapLogEntry[], events: readonly BatonEvent[], t0: number): SwapRecord[] {
  const byId = new Map<number, PolicySwapEvent[]>();
  for (const e of events)
    if (e.type === 'policy-swap') {
      const list = byId.get(e.swap) ?? [];
      list.push(e);
      byId.set(e.swap, list);
    }
  return log.map((l) => ({
    swap: l.swap,
    what: l.what,
    by: l.by,
    requested_at: l.requestedWall,
    requested_ms: l.requestedAt - t0,
    from: l.from,
    to: l.to,
    at_iteration: l.atIteration ?? null,
    latency_ms: l.latencyMs,
    adopted: (byId.get(l.swap) ?? [])
      .sort((a, b) => a.stage - b.stage)
      .map((e) => ({ stage: e.stage, iteration: e.iteration, tasks: e.tasks, t_ms: e.t - t0 })),
  }));
}

/** Refuses a `--swap-at` schedule the job would refuse (an unknown name, a policy that cannot run the shape, a boundary the job does not have). */
export function checkSwapSchedule(cfg: JobConfig, initial: HintPolicy, shape: PipelineShape, o?: SwapOptions): void {
  let tail = initial;
  const last = cfg.firstIteration + cfg.warmupIterations + cfg.iterations - 1;
  const wide = wideJobSwapProblem({ mode: cfg.mode, nextIteration: 0, lastIteration: last, tp: cfg.tp, dp: cfg.dp });
  if (wide !== null && ((o?.schedule?.length ?? 0) > 0 || (o?.modules?.length ?? 0) > 0))
    throw new SwapRefusedError(`--swap-at/--swap-modules: ${wide}`);
  for (const s of o?.schedule ?? []) {
    const where = `--swap-at it=${s.iteration}:${s.policy}`;
    let to: HintPolicy;
    try {
      to = resolvePolicy(s.policy);
    } catch (err) {
      throw new SwapRefusedError(`${where}: ${(err as Error).message}`, { cause: err });
    }
    const d = decideSwap(
      tail,
      to,
      shape,
      { mode: cfg.mode, nextIteration: cfg.firstIteration, lastIteration: last, tp: cfg.tp, dp: cfg.dp },
      { atIteration: s.iteration },
    );
    if (!d.accepted) throw new SwapRefusedError(`${where}: ${d.reason}`);
    tail = to;
  }
}
