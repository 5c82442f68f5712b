// What a stage's parameter store (param-store.ts) keeps between its messages, and what it
// reports of that: its updates and their staleness, its extra state's and optimizer's
// bytes, its consistency policies.

import { NAdamW } from '../policies/optim/nadamw';
import { ParamInfo } from '../policies/optim/params';
import { ConsistencyPolicy } from '../policies/consistency/policy';
import { ConsistencyEra, ConsistencySwap } from './consistency-swap';

export type ParamMapF = Map<string, Float32Array>;

export interface StoreStats {
  updates: number;
  /** The most microbatches in flight at the stage (FRESCO's τ is one less: see makePolicy). */
  inflightBound: number;
  /** The delay PipeMare and prediction assume, in updates. */
  delay: number;
  staleness: { mean: number; max: number; count: number };
  /** Per update, in order: the staleness of the microbatch whose B made it. */
  stalenessByUpdate: number[];
  extraStateBytes: number;
  optimizerBytes: number;
  consistency: string;
  /** The policies this store used, each from which update (1-based) on. */
  consistencyEras: ConsistencyEra[];
}

export interface StoreState {
  params: ParamMapF | null;
  infos: ParamInfo[];
  optimizer: NAdamW | null;
  policy: ConsistencyPolicy | null;
  step: number;
  forwardStep: Map<number, number>;
  staleness: number[];
  peakExtraBytes: number;
  /** A consistency swap waiting for its safe point, and the policies so far. */
  next: ConsistencySwap | null;
  eras: ConsistencyEra[];
  /** The stream (job-wide microbatch numbers): one past the highest microbatch applied, or
   * where the stage resumed; and the microbatches before it recoveries made it skip (param-store-snapshot.ts). */
  high: number;
  skipped: number;
  /** The first microbatch this store applies: those before it were applied before a recovery, or lost. */
  floor: number;
}

/** What the store reports (a stats message) of its state and its in-flight bound and delay. */
export function storeStats(st: StoreState, c: { readonly inflight: number; readonly delay: number }): StoreStats {
  const n = st.staleness.length;
  return {
    updates: st.step,
    inflightBound: c.inflight,
    delay: c.delay,
    staleness: {
      mean: n ? st.staleness.reduce((a, b) => a + b, 0) / n : 0,
      max: st.staleness.reduce((a, b) => Math.max(a, b), 0),
      count: n,
    },
    stalenessByUpdate: [...st.staleness],
    extraStateBytes: st.peakExtraBytes,
    optimizerBytes: st.optimizer?.stateBytes() ?? 0,
    consistency: st.eras[st.eras.length - 1].policy,
    consistencyEras: [...st.eras],
  };
}
