// A Bus that seals what it publishes and takes only what is sealed under its key
// (auth-seal.ts): the job's processes talk through one, so a stranger on the NATS server
// can neither forge a message nor alter or replay one. What it refuses never reaches a
// handler, so a forgery cannot displace a genuine message: the first genuine arrival wins.
// Refusals are counted by reason (`unauthenticated`: no seal, or not one under this key;
// `replay`: a sealer's count not above the last one this subscription took) and told to
// `onReject`. Replays are tracked per subscription: NATS delivers one publisher's messages
// to one subscription in order, and two subscriptions that match one subject each get it.

import type { Bus, BusHandler, BusMeta, PermissionDenial, Subscription } from './bus';
import { Sealer, openSeal } from './auth-seal';
import { joinParts } from './codec';

export type AuthRejectReason = 'unauthenticated' | 'replay' | 'forged-sender';

export interface AuthBusOptions {
  /** Told each refusal (after it is counted). Must not throw; a throw is swallowed. */
  onReject?: (reason: AuthRejectReason, subject: string, detail: string) => void;
}

/** Most sealers a subscription remembers for replay checks (a launch has a few per process). */
const MAX_SEALERS = 4096;

export class AuthBus implements Bus {
  readonly kind: string;
  readonly rejected: Record<AuthRejectReason, number> = { unauthenticated: 0, replay: 0, 'forged-sender': 0 };
  onReject: AuthBusOptions['onReject'];
  private readonly sealer: Sealer;

  constructor(
    readonly inner: Bus,
    private readonly key: Uint8Array,
    /** Who this process is, as the seals say it (`launcher`, `node:<name>`, `tool`). */
    readonly label: string,
    opts: AuthBusOptions = {},
  ) {
    this.kind = inner.kind;
    this.sealer = new Sealer(key, label);
    this.onReject = opts.onReject;
  }

  get maxMessageBytes(): number {
    return this.inner.maxMessageBytes;
  }

  /** Refusals of every reason. */
  get rejectedCount(): number {
    return this.rejected.unauthenticated + this.rejected.replay + this.rejected['forged-sender'];
  }

  publish(subject: string, data: Uint8Array): void {
    this.inner.publish(subject, data, this.sealer.seal(subject, data));
  }

  /** The seal covers every byte of the parts, as of the message they make. */
  publishParts(subject: string, parts: readonly Uint8Array[]): void {
    const seal = this.sealer.seal(subject, parts);
    if (this.inner.publishParts) this.inner.publishParts(subject, parts, seal);
    else this.inner.publish(subject, joinParts(parts), seal);
  }

  subscribe(subject: string, handler: BusHandler): Subscription {
    const last = new Map<string, number>();
    return this.inner.subscribe(subject, (subj, data, meta) => {
      const opened = openSeal(this.key, subj, data, meta?.seal);
      if (opened === null) {
        this.refuse(
          'unauthenticated',
          subj,
          meta?.seal === undefined ? 'a message without a seal' : 'a message whose seal is not one under the job key',
        );
        return;
      }
      const before = last.get(opened.sealer);
      if (before !== undefined && opened.count <= before) {
        this.refuse('replay', subj, `message ${opened.count} of ${opened.label} again (last taken: ${before})`);
        return;
      }
      if (before === undefined && last.size >= MAX_SEALERS) last.clear();
      last.set(opened.sealer, opened.count);
      const told: BusMeta = { sender: opened.label };
      handler(subj, data, told);
    });
  }

  /** Count a refusal a receiver made from an opened seal (a sender label its message contradicts). */
  refuse(reason: AuthRejectReason, subject: string, detail: string): void {
    this.rejected[reason]++;
    try {
      this.onReject?.(reason, subject, detail);
    } catch {
      /* a failing hook must not break delivery */
    }
  }

  flush(): Promise<void> {
    return this.inner.flush();
  }

  written(): Promise<void> {
    return this.inner.written();
  }

  /** Closes the bus underneath too. */
  close(): Promise<void> {
    return this.inner.close();
  }

  /** The refusals of the bus underneath (its server's permissions see this process's user, not its seals). */
  watchDenials(on: (d: PermissionDenial) => void): void {
    this.inner.watchDenials?.(on);
  }
}
