// The actor runtime: nact underneath, plus the bookkeeping the virtual clock needs.
// Every message goes through `send`, which counts it as work until its handler has
// finished, so the virtual clock knows when all actors are idle. A handler that throws
// is logged and counted; the actor keeps its previous state and carries on (nact's
// `resume` supervision), so a bad message never takes an actor down.

import { dispatch, spawn, start, stop, Ref, ActorSystemRef } from 'nact';
import { Clock, VirtualClock } from '../base/clock';

export type Handler<S, M> = (state: S, msg: M, self: ActorRef<M>) => S | Promise<S>;

export interface ActorRef<M> {
  readonly name: string;
  readonly ref: Ref<M>;
}

export interface ActorFailure {
  actor: string;
  error: Error;
}

let systems = 0;

export class ActorRuntime {
  private readonly system: ActorSystemRef;
  private readonly virtual: VirtualClock | null;
  readonly failures: ActorFailure[] = [];
  /** Called on every actor failure (a job fails fast instead of stalling). */
  onFailure: ((f: ActorFailure) => void) | null = null;

  constructor(
    readonly clock: Clock,
    name = 'baton',
  ) {
    this.system = start(`${name}-${++systems}`);
    this.virtual = clock instanceof VirtualClock ? clock : null;
  }

  spawn<S, M>(name: string, initial: S, handler: Handler<S, M>): ActorRef<M> {
    const counter = this.virtual;
    const self: { name: string; ref: Ref<M> } = { name, ref: undefined as unknown as Ref<M> };
    self.ref = spawn(
      this.system,
      async (state: S, msg: M) => {
        try {
          return await handler(state, msg, self);
        } catch (err) {
          this.fail(name, err);
          return state;
        } finally {
          counter?.leave();
        }
      },
      name,
      { initialState: initial },
    );
    return self;
  }

  send<M>(to: ActorRef<M>, msg: M): void {
    this.virtual?.enter();
    dispatch(to.ref, msg);
  }

  /** Records a failure outside a message handler (a timer, a promise) and reports it. */
  fail(actor: string, err: unknown): void {
    const f = { actor, error: err instanceof Error ? err : new Error(String(err)) };
    this.failures.push(f);
    this.onFailure?.(f);
  }

  /** Counts `p` as work until it settles, so the virtual clock waits for it. */
  hold<T>(p: Promise<T>): Promise<T> {
    if (!this.virtual) return p;
    const v = this.virtual;
    v.enter();
    return p.finally(() => v.leave());
  }

  /** Ask an actor something; `make` builds the message around the reply address. */
  async ask<M, R>(to: ActorRef<M>, make: (reply: (r: R) => void) => M, timeoutMs = 5000): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`actor ${to.name} did not answer within ${timeoutMs} ms`)),
        timeoutMs,
      );
      this.send(
        to,
        make((r) => {
          clearTimeout(timer);
          resolve(r);
        }),
      );
    });
  }

  stopActor(a: ActorRef<unknown>): void {
    stop(a.ref);
  }

  /** Stop every actor and cancel the clock's pending timers (a message a receiver was still
   * holding, say), so nothing of the job fires afterwards or keeps the process alive. */
  shutdown(): void {
    stop(this.system);
    this.clock.clearAll();
  }
}
