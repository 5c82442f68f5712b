// In-process Bus: NATS subject semantics (`*` one token, `>` one or more trailing
// tokens) without a server. publish() delivers synchronously, in subscription order,
// to every matching handler, passing the very same Uint8Array (nothing is copied, so
// receivers must treat it as read-only). A throwing handler is caught, counted and
// reported to `onError`; delivery to the others goes on.
//
// It sits on the simulator's hot path: the handler list for a subject is resolved once
// (exact map + wildcard list) and cached until the subscriptions change.
//
// Not modelled: latency, bandwidth, queue groups, reply subjects, message loss.

import type { Bus, BusHandler, Subscription } from './bus';
import { DEFAULT_MAX_MESSAGE_BYTES } from './codec';
import { quoteValue } from '../base/quote';
import { EXIT_FAILED, ExitStatus } from '../base/errors';
import { SubjectError } from './subjects';

/**
 * A subject the bus refuses: the SubjectError of a subject as a whole rather than of a job
 * name. A job fails with it (exit status 1), as it did before it was a SubjectError.
 */
export class InvalidSubjectError extends SubjectError {
  override name = 'InvalidSubjectError';
  override readonly exitStatus: ExitStatus = EXIT_FAILED;
}

export class BusClosedError extends Error {
  override name = 'BusClosedError';
}

/**
 * Longest subject, in UTF-8 bytes. A NATS server drops the connection of a client whose
 * protocol line (PUB or SUB with the subject) is over its max_control_line, 4 KB by default,
 * losing what was in flight on it; Baton's own subjects are far shorter.
 */
export const MAX_SUBJECT_BYTES = 1024;

/** Throw InvalidSubjectError unless `s` is a valid NATS subject (wildcards only where allowed). */
export function checkSubject(s: string, allowWildcards: boolean): string {
  if (typeof s !== 'string' || s.length === 0)
    throw new InvalidSubjectError(`subject ${quoteValue(s)} must be a non-empty string`);
  if (s.length * 3 > MAX_SUBJECT_BYTES && Buffer.byteLength(s) > MAX_SUBJECT_BYTES)
    throw new InvalidSubjectError(`subject ${quoteValue(s)} is longer than ${MAX_SUBJECT_BYTES} bytes`);
  const tokens = s.split('.');
  tokens.forEach((t, i) => {
    if (t.length === 0 || /\s/.test(t))
      throw new InvalidSubjectError(
        `subject ${JSON.stringify(s)}: token ${i} ${JSON.stringify(t)} is empty or has whitespace`,
      );
    const wild = t === '*' || t === '>';
    if (wild && !allowWildcards)
      throw new InvalidSubjectError(`subject ${JSON.stringify(s)}: wildcards are not allowed when publishing`);
    if (t === '>' && i !== tokens.length - 1)
      throw new InvalidSubjectError(`subject ${JSON.stringify(s)}: '>' must be the last token`);
  });
  return s;
}

/** True when `subject` (no wildcards) matches `pattern` (tokens, wildcards allowed). */
export function subjectMatches(pattern: readonly string[], subject: readonly string[]): boolean {
  for (let i = 0; i < pattern.length; i++) {
    const p = pattern[i];
    if (p === '>') return subject.length > i;
    if (i >= subject.length) return false;
    if (p !== '*' && p !== subject[i]) return false;
  }
  return pattern.length === subject.length;
}

interface Entry {
  readonly id: number;
  readonly pattern: string;
  readonly tokens: readonly string[] | null; // null for an exact subject
  readonly handler: BusHandler;
  active: boolean;
}

export interface LocalBusOptions {
  /** Called with every handler exception (after it is counted). Default: none. */
  onError?: (err: unknown, subject: string) => void;
  /** Most subjects whose handler lists are cached; the cache is cleared beyond it. Default 10000. */
  maxCachedSubjects?: number;
}

export class LocalBus implements Bus {
  readonly kind = 'local';
  readonly maxMessageBytes = DEFAULT_MAX_MESSAGE_BYTES;
  /** Handler exceptions caught so far. */
  errors = 0;
  published = 0;
  delivered = 0;
  bytesPublished = 0;
  /** Publishes after close(), dropped. */
  dropped = 0;
  onError: ((err: unknown, subject: string) => void) | undefined;

  private readonly exact = new Map<string, Entry[]>();
  private wildcards: Entry[] = [];
  private readonly cache = new Map<string, readonly Entry[]>();
  private readonly maxCached: number;
  private nextId = 0;
  private closed = false;

  constructor(opts: LocalBusOptions = {}) {
    this.onError = opts.onError;
    this.maxCached = opts.maxCachedSubjects ?? 10_000;
  }

  publish(subject: string, data: Uint8Array, seal?: Uint8Array): void {
    if (this.closed) {
      this.dropped++;
      return;
    }
    let entries = this.cache.get(subject);
    if (entries === undefined) entries = this.resolve(checkSubject(subject, false));
    this.published++;
    this.bytesPublished += data.byteLength;
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i];
      if (!e.active) continue; // unsubscribed by an earlier handler of this same message
      this.delivered++;
      try {
        if (seal === undefined) e.handler(subject, data);
        else e.handler(subject, data, { seal });
      } catch (err) {
        this.report(err, subject);
      }
    }
  }

  subscribe(subject: string, handler: BusHandler): Subscription {
    if (this.closed) throw new BusClosedError(`LocalBus: subscribe to ${JSON.stringify(subject)} after close()`);
    checkSubject(subject, true);
    const wild = subject.includes('*') || subject.includes('>');
    const entry: Entry = {
      id: this.nextId++,
      pattern: subject,
      tokens: wild ? subject.split('.') : null,
      handler,
      active: true,
    };
    if (wild) this.wildcards = [...this.wildcards, entry];
    else this.exact.set(subject, [...(this.exact.get(subject) ?? []), entry]);
    this.cache.clear();
    return { unsubscribe: () => this.remove(entry) };
  }

  /** Number of live subscriptions. */
  get subscriptionCount(): number {
    let n = this.wildcards.length;
    for (const list of this.exact.values()) n += list.length;
    return n;
  }

  async flush(): Promise<void> {
    // Delivery is synchronous: everything published has already been handed over.
  }

  async written(): Promise<void> {
    // As for flush(): nothing is ever pending.
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const list of this.exact.values()) for (const e of list) e.active = false;
    for (const e of this.wildcards) e.active = false;
    this.exact.clear();
    this.wildcards = [];
    this.cache.clear();
  }

  private resolve(subject: string): readonly Entry[] {
    const exact = this.exact.get(subject) ?? [];
    let entries: readonly Entry[] = exact;
    if (this.wildcards.length > 0) {
      const tokens = subject.split('.');
      const wild = this.wildcards.filter((e) => subjectMatches(e.tokens!, tokens));
      if (wild.length > 0) entries = [...exact, ...wild].sort((a, b) => a.id - b.id);
    }
    if (this.cache.size >= this.maxCached) this.cache.clear();
    this.cache.set(subject, entries);
    return entries;
  }

  private remove(entry: Entry): void {
    if (!entry.active) return;
    entry.active = false;
    if (entry.tokens) {
      this.wildcards = this.wildcards.filter((e) => e !== entry);
    } else {
      const rest = (this.exact.get(entry.pattern) ?? []).filter((e) => e !== entry);
      if (rest.length > 0) this.exact.set(entry.pattern, rest);
      else this.exact.delete(entry.pattern);
    }
    this.cache.clear();
  }

  private report(err: unknown, subject: string): void {
    this.errors++;
    if (!this.onError) return;
    try {
      this.onError(err, subject);
    } catch {
      // A failing error hook must not take delivery down either; the count above stands.
    }
  }
}
