// A job's policy control in the process that runs its coordinator: the policy actor
// (actors/policy-actor.ts), its subscription to baton.<job>.policy.*, the swaps of a
// `--swap-at` schedule (sent before the first iteration starts, each for its iteration),
// and a handle to ask for swaps from this process.

import { HintPolicy } from '../policies/hint';
import { isModulePath, resolvePolicy } from '../policies/registry';
import { ScheduledSwap } from '../policies/swap-schedule';
import { InputError } from '../base/errors';
import { AuthBus } from '../transport/auth-bus';
import { Subscription } from '../transport/bus';
import { subject } from '../transport/subjects';
import {
  PolicyActor,
  PolicyActorWiring,
  PolicyView,
  SetAnswer,
  SwapLogEntry,
  spawnPolicyActor,
} from '../actors/policy-actor';

export interface SwapOptions {
  /** Scripted swaps: at the start of each listed iteration. */
  readonly schedule?: readonly ScheduledSwap[];
  /** Module paths swaps may load (a schedule's modules are added). */
  readonly modules?: readonly string[];
  /** Called once the job's policy control is up: a handle to swap from this process (tests, tools). */
  readonly onControl?: (c: PolicyControl) => void;
}

export interface PolicyControl {
  /** Ask for a swap; resolves with the answer, and `adopted` once every stage took it. */
  request(
    policy: string,
    by?: string,
    what?: 'arbitration' | 'consistency',
  ): Promise<{ answer: SetAnswer; adopted: Promise<SwapLogEntry> | null }>;
  view(): PolicyView;
}

/** A swap refused before the job starts (a `--swap-at` entry): bad input. */
export class SwapRefusedError extends InputError {
  override name = 'SwapRefusedError';
}

/** The module paths a job's stages may load in a swap: those named in its options. */
export function swapModulesOf(o: SwapOptions | undefined): string[] {
  const mods = new Set(o?.modules ?? []);
  for (const s of o?.schedule ?? []) if (isModulePath(s.policy)) mods.add(s.policy);
  return [...mods];
}

/** The policy actor's wiring but its resolver, which the job's swap options make, and those options. */
export interface PolicyControlWiring extends Omit<PolicyActorWiring, 'resolve'> {
  readonly options?: SwapOptions;
}

export interface StartedPolicyControl {
  readonly actor: PolicyActor;
  readonly subscription: Subscription;
}

export function startPolicyControl(w: PolicyControlWiring): StartedPolicyControl {
  const modules = swapModulesOf(w.options);
  const resolve = (name: string): HintPolicy => {
    if (isModulePath(name) && !modules.includes(name))
      throw new SwapRefusedError(
        `policy module ${JSON.stringify(name)}: this job was not started with it (--swap-modules), so its stages will not load it`,
      );
    return resolvePolicy(name);
  };
  const actor = spawnPolicyActor({ ...w, resolve });
  // A sealed bus (every job over NATS) has opened each message's seal: its label is the sender.
  const required = w.bus instanceof AuthBus;
  const subscription = w.bus.subscribe(`${subject(w.job, 'policy')}.*`, (subj, data, meta) =>
    w.runtime.send(actor.ref, { type: 'bytes', subject: subj, data, seal: { required, sender: meta?.sender } }),
  );
  const request: PolicyControl['request'] = (policy, by = `pid ${process.pid}`, what = 'arbitration') =>
    new Promise((resolveAnswer) => {
      let adoptedResolve: (e: SwapLogEntry) => void = () => {};
      const adopted = new Promise<SwapLogEntry>((r) => (adoptedResolve = r));
      w.runtime.send(actor.ref, {
        type: 'set',
        request: { verb: 'set', policy, by, what },
        reply: (answer) => resolveAnswer({ answer, adopted: answer.ok ? adopted : null }),
        onAdopted: (e) => adoptedResolve(e),
      });
    });
  for (const s of w.options?.schedule ?? [])
    w.runtime.send(actor.ref, {
      type: 'set',
      request: { verb: 'set', policy: s.policy, by: '--swap-at', atIteration: s.iteration },
      reply: (a) => {
        if (!a.ok)
          w.runtime.fail('policy', new SwapRefusedError(`--swap-at it=${s.iteration}:${s.policy}: ${a.error}`));
      },
    });
  w.options?.onControl?.({ request, view: () => actor.view() });
  return { actor, subscription };
}
