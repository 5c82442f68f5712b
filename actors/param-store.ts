// The parameter-store actor of a stage in asynchronous mode: it owns the stage's
// parameters and optimizer state, hands the stage the weights for each F and B, learns
// "F ran for microbatch j with these layer inputs" and "B ran for j with these
// gradients", and applies the consistency policy (the paper's names: inconsistent,
// stash, recovery, spectrain, pipeoptim, lwp, fresco; and projection-control, FRESCO's
// projection where nothing is in flight) to every update. The stage never touches
// parameters itself. PipeMare's learning-rate damping (LRD) is an option of any method.
//
// Every B triggers one update (no flush). The store records each update's staleness:
// how many updates happened at this stage between the microbatch's F and its B.
// With emulated compute there are no tensors: the store only counts updates and
// staleness, which is what the simulator reports.
//
// Not modelled: several chunks per stage (asynchronous mode runs V = 1), and clipping
// across stages (each stage clips its own gradient norm).

import { clipGradNorm } from '../policies/optim/clip';
import { NAdamW } from '../policies/optim/nadamw';
import { ParamInfo } from '../policies/optim/params';
import { applyUpdates } from '../policies/optim/params';
import { lrAt } from '../policies/optim/schedule';
import { LayerInput } from '../policies/consistency/policy';
import { CapturedLinearInput } from '../models/layers';
import { ActorRef, ActorRuntime } from './runtime';
import { dampingFactor } from '../policies/consistency/pipemare';
import { adoptable, beginSwap, watchBackward, watchForward } from './consistency-swap';
import { ParamMapF, StoreState, StoreStats, storeStats } from './param-store-state';
import { AsyncSnapshot, restoreStore, takeSnapshot } from './param-store-snapshot';
import {
  AsyncSettings,
  ConsistencyName,
  NEEDS_LAYERS,
  ParamStoreError,
  canonicalConsistency,
  lrdOn,
  makePolicy,
} from './param-store-policy';

export {
  AsyncSettings,
  BACKWARD_MODES,
  BackwardMode,
  CONSISTENCY_ALIASES,
  CONSISTENCY_METHODS,
  PAPER_METHODS,
  CONSISTENCY_POLICIES,
  ConsistencyMethod,
  ConsistencyName,
  ParamStoreError,
  canonicalConsistency,
  lrdOn,
  pipemareHorizon,
} from './param-store-policy';

export { ParamMapF, StoreStats } from './param-store-state';

export type StoreMsg =
  | {
      readonly type: 'weights';
      readonly purpose: 'forward' | 'backward';
      readonly mb: number;
      readonly reply: (w: ReadonlyMap<string, Float32Array> | null) => void;
    }
  | { readonly type: 'forward-ran'; readonly mb: number; readonly inputs?: readonly CapturedLinearInput[] }
  | { readonly type: 'backward-ran'; readonly mb: number; readonly grads?: ParamMapF }
  | { readonly type: 'stats'; readonly reply: (s: StoreStats) => void }
  /** Switch consistency policy at its safe point (consistency-swap.ts). */
  | { readonly type: 'swap-consistency'; readonly swap: number; readonly to: ConsistencyName }
  | { readonly type: 'params'; readonly reply: (p: ParamMapF) => void }
  /** Send a snapshot of the state as it is now (when the store keeps snapshots), then reply. */
  | { readonly type: 'snapshot'; readonly reply: () => void };

/** A backward's gradients, one per parameter of its size, clipped to norm `clip` (a non-finite norm throws). */
function checkedGrads(
  stage: number,
  mb: number,
  params: ParamMapF,
  grads: ParamMapF | undefined,
  clip: number,
): ParamMapF {
  if (!grads) throw new ParamStoreError(`stage ${stage}: backward of microbatch ${mb} came without gradients`);
  for (const [name, p] of params) {
    const g = grads.get(name);
    if (g === undefined || g.length !== p.length)
      throw new ParamStoreError(
        `stage ${stage}: backward of microbatch ${mb}: ${g === undefined ? `no gradient for ${name}` : `gradient of ${name} has ${g.length} values, the parameter ${p.length}`}`,
      );
  }
  clipGradNorm(grads, clip);
  return grads;
}

export interface ParamStoreWiring {
  runtime: ActorRuntime;
  stage: number;
  /** The most microbatches in flight at this stage (policies/backpressure.ts inflightBound). */
  inflightBound: number;
  /** The delay, in updates, PipeMare and prediction assume (default inflightBound - 1). */
  delay?: number;
  settings: AsyncSettings;
  /** Initial parameters (real compute) or null (emulated compute: only counting). */
  params: ParamMapF | null;
  infos: ParamInfo[];
  /** projection-control: τ by linear weight name (see models/control-taus.ts); absent ones get 0. */
  controlTaus?: ReadonlyMap<string, number>;
  /** Told when a consistency swap takes effect: its number, the policies, the updates made before it. */
  onConsistencySwap?: (swap: number, from: string, to: string, updates: number) => void;
  /** Snapshots for recovery (job/async-recovery.ts): every `every` updates one goes to `send` (real compute only). */
  snapshots?: { readonly every: number; readonly send: (snap: AsyncSnapshot, copyMs: number, last?: boolean) => void };
  /** The snapshot a replacement starts from; the stream resumes at settings.firstMicrobatch. */
  resume?: AsyncSnapshot;
}

/** What every handler of one store needs besides its state: fixed when the store is spawned. */
interface StoreSetup {
  readonly settings: AsyncSettings;
  readonly stage: number;
  readonly inflight: number;
  readonly delay: number;
  /** The learning rate of the t-th update. */
  readonly lrOf: (step: number) => number;
  readonly controlTaus?: ReadonlyMap<string, number>;
  readonly onConsistencySwap?: ParamStoreWiring['onConsistencySwap'];
  readonly snapshots?: ParamStoreWiring['snapshots'];
}

type MsgOf<T extends StoreMsg['type']> = Extract<StoreMsg, { type: T }>;

function giveWeights(st: StoreState, msg: MsgOf<'weights'>, c: StoreSetup): void {
  // FRESCO's policy exists only after the first forward; until then the weights are current.
  const ctx = st.params ? { params: st.params, step: st.step, lr: c.lrOf(st.step + 1) } : null;
  if (!ctx) msg.reply(null);
  else if (!st.policy) msg.reply(ctx.params);
  else
    msg.reply(
      msg.purpose === 'forward' ? st.policy.weightsForForward(msg.mb, ctx) : st.policy.weightsForBackward(msg.mb, ctx),
    );
}

function forwardRan(st: StoreState, msg: MsgOf<'forward-ran'>, c: StoreSetup): void {
  if (st.forwardStep.has(msg.mb))
    throw new ParamStoreError(`stage ${c.stage}: forward of microbatch ${msg.mb} reported twice`);
  st.forwardStep.set(msg.mb, st.step);
  if (st.params && !st.policy)
    st.policy = makePolicy(c.settings, st.optimizer, c.inflight, c.delay, msg.inputs, c.controlTaus);
  if (st.policy) {
    const inputs = new Map<string, LayerInput>((msg.inputs ?? []).map((i) => [i.weight, { x: i.x, n: i.n }]));
    st.policy.forward(msg.mb, inputs);
    st.peakExtraBytes = Math.max(st.peakExtraBytes, st.policy.extraStateBytes());
  }
  if (st.next) {
    if (st.params)
      watchForward(st.next, msg.mb, msg.inputs, (s, inputs) =>
        makePolicy(s, st.optimizer, c.inflight, c.delay, inputs, c.controlTaus),
      );
    adoptWhenSafe(st, c);
  }
}

/** Put a waiting consistency swap in force once its safe point has come. */
function adoptWhenSafe(st: StoreState, c: StoreSetup): void {
  const sw = st.next;
  if (!sw || !adoptable(sw, st.params === null)) return;
  const from = st.eras[st.eras.length - 1].policy;
  if (st.params) st.policy = sw.policy;
  st.next = null;
  st.eras.push({ policy: sw.to, fromUpdate: st.step + 1, swap: sw.swap });
  c.onConsistencySwap?.(sw.swap, from, sw.to, st.step);
}

function backwardRan(st: StoreState, msg: MsgOf<'backward-ran'>, c: StoreSetup): void {
  const at = st.forwardStep.get(msg.mb);
  if (at === undefined)
    throw new ParamStoreError(`stage ${c.stage}: backward of microbatch ${msg.mb} without its forward`);
  // Below the floor of a resumed store: applied before the recovery, or counted lost; not applied (again).
  if (c.settings.firstMicrobatch + msg.mb < st.floor) {
    st.forwardStep.delete(msg.mb);
    st.policy?.backward(msg.mb);
    if (st.next) watchBackward(st.next, msg.mb);
    adoptWhenSafe(st, c);
    return;
  }
  // Checked (and clipped) before anything changes: a refused gradient leaves the store as it was.
  const update =
    st.params && st.optimizer && st.policy
      ? {
          params: st.params,
          optimizer: st.optimizer,
          policy: st.policy,
          grads: checkedGrads(c.stage, msg.mb, st.params, msg.grads, c.settings.clip),
        }
      : null;
  st.forwardStep.delete(msg.mb);
  st.staleness.push(st.step - at);
  if (st.next) watchBackward(st.next, msg.mb);
  if (update) {
    const { params, optimizer, policy, grads } = update;
    policy.backward(msg.mb);
    const lr = c.lrOf(st.step + 1);
    const delta = optimizer.propose(params, grads, lr);
    policy.transformUpdate(delta, { params, step: st.step + 1, lr });
    applyUpdates(params, delta);
    st.peakExtraBytes = Math.max(st.peakExtraBytes, policy.extraStateBytes());
  }
  st.step++;
  st.high = Math.max(st.high, c.settings.firstMicrobatch + msg.mb + 1);
  const snaps = c.snapshots;
  if (snaps && snaps.every > 0 && st.step % snaps.every === 0) sendSnapshot(st, c, false);
  adoptWhenSafe(st, c);
}

/** A snapshot of the state to the launcher, with what copying it took; `last`: the job is being dropped. */
function sendSnapshot(st: StoreState, c: StoreSetup, last: boolean): void {
  if (!c.snapshots || !st.params) return;
  const t0 = performance.now();
  const snap = takeSnapshot(st);
  c.snapshots.send(snap, performance.now() - t0, last);
}

export function spawnParamStore(w: ParamStoreWiring): ActorRef<StoreMsg> {
  const { settings: s, stage, inflightBound: inflight } = w;
  const delay = w.delay ?? inflight - 1;
  if (!Number.isInteger(inflight) || inflight < 1)
    throw new ParamStoreError(`stage ${stage}: in-flight bound must be a positive integer, got ${inflight}`);
  if (!Number.isInteger(delay) || delay < 0 || delay >= inflight)
    throw new ParamStoreError(`stage ${stage}: delay must be an integer in [0, ${inflight}), got ${delay}`);
  const optimizer = w.params ? new NAdamW(w.infos, { beta1: s.beta1, weightDecay: s.weightDecay }) : null;
  const initial: StoreState = {
    params: w.params,
    infos: w.infos,
    optimizer,
    // FRESCO needs the layer shapes it sees in the first forward; the others start now.
    policy:
      w.params && !NEEDS_LAYERS.includes(canonicalConsistency(s.consistency))
        ? makePolicy(s, optimizer, inflight, delay)
        : null,
    step: 0,
    forwardStep: new Map(),
    staleness: [],
    peakExtraBytes: 0,
    next: null,
    eras: [{ policy: s.consistency, fromUpdate: 1, swap: null }],
    // A stage resumed without a snapshot starts from the seed: every microbatch before the stream's resumption is skipped.
    high: s.firstMicrobatch,
    skipped: s.firstMicrobatch,
    floor: s.firstMicrobatch,
  };
  if (w.resume) restoreStore(stage, initial, w.resume, s.firstMicrobatch);
  // With LRD the stage's delay damps the lr (Adam-family updates are linear in it, weight decay included).
  const lrd = lrdOn(s);
  const setup: StoreSetup = {
    settings: s,
    stage,
    inflight,
    delay,
    // The schedule counts updates from 1 (the t-th update uses lrAt(t)), as in synchronous training.
    lrOf: (step: number) =>
      lrAt({ peak: s.lr, warmupSteps: s.warmup, totalSteps: Math.max(s.totalUpdates, s.warmup + 1) }, step) *
      (lrd ? dampingFactor(Math.max(1, delay), step, s.pipemareSteps) : 1),
    controlTaus: w.controlTaus,
    onConsistencySwap: w.onConsistencySwap,
    snapshots: w.snapshots,
  };
  return w.runtime.spawn<StoreState, StoreMsg>(`param-store-${stage}`, initial, (st, msg) => {
    switch (msg.type) {
      case 'weights':
        giveWeights(st, msg, setup);
        return st;
      case 'forward-ran':
        forwardRan(st, msg, setup);
        return st;
      case 'backward-ran':
        backwardRan(st, msg, setup);
        return st;
      case 'params':
        msg.reply(
          new Map([...(st.params ?? new Map<string, Float32Array>())].map(([n, p]) => [n, Float32Array.from(p)])),
        );
        return st;
      case 'stats':
        msg.reply(storeStats(st, setup));
        return st;
      case 'snapshot':
        sendSnapshot(st, setup, true);
        msg.reply();
        return st;
      case 'swap-consistency':
        // A later swap replaces one still waiting (the waiting one is never in force).
        st.next = beginSwap(msg.swap, msg.to, setup.settings, st.forwardStep.keys());
        adoptWhenSafe(st, setup);
        return st;
    }
  });
}
