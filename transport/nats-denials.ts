// A NATS server's permission refusals, as a NatsBus sees them: the server answers a publish
// or subscription its user may not make with an error on the connection, later (nats.js
// reports it on the status stream), and the message is simply not delivered. Each refusal
// is read from the error (permissionDenialOf), counted, and told to every listener.

import type { PermissionDenial } from './bus';
import { errorText } from './nats-bus-errors';

/** The longest subject a denial keeps (the server's subjects are far shorter; a peer's need not be). */
const MAX_DENIED_SUBJECT = 512;

/**
 * The permission refusal `err` reports, or null when it is another error: nats.js 3 gives
 * a PermissionViolationError (`operation`, `subject`); its message, `Permissions Violation
 * for Publish to "subj"`, is read as well, so an error of another shape still counts.
 */
export function permissionDenialOf(err: unknown): PermissionDenial | null {
  const message = errorText(err);
  if (!/permissions violation/i.test(message)) return null;
  const e = err as { operation?: unknown; subject?: unknown };
  const m = /(Publish|Subscription) to "([^"]+)"/i.exec(message);
  const named = e.operation === 'publish' || e.operation === 'subscription' ? e.operation : undefined;
  const operation = named ?? (m?.[1].toLowerCase() === 'subscription' ? 'subscription' : 'publish');
  const subject = typeof e.subject === 'string' && e.subject !== '' ? e.subject : (m?.[2] ?? '');
  return { operation, subject: subject.slice(0, MAX_DENIED_SUBJECT), message: message.slice(0, 1000) };
}

export class DenialWatch {
  /** Refusals seen. */
  count = 0;
  private readonly listeners: ((d: PermissionDenial) => void)[] = [];

  /** `failed` hears a listener's exception (it must not stop the others or the status watch). */
  constructor(private readonly failed: (err: unknown, subject: string) => void) {}

  watch(on: (d: PermissionDenial) => void): void {
    this.listeners.push(on);
  }

  /** The refusal `err` reports, counted and told to each listener; null when it is another error. */
  take(err: unknown): PermissionDenial | null {
    const d = permissionDenialOf(err);
    if (!d) return null;
    this.count++;
    for (const on of this.listeners)
      try {
        on(d);
      } catch (e) {
        this.failed(e, d.subject);
      }
    return d;
  }
}
