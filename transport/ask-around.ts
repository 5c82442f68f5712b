// Asking whoever is out there on a bus: listen for answers, publish the question, and
// collect what comes back within a short wait. A job-name claim and a node agent's
// check that its name is free both ask this way.

import { Bus } from './bus';
import { decodeValue, encodeValue } from './codec';

export interface AskAround<T> {
  /** Where answers come (subscribed before the question goes out). */
  readonly listen: string;
  /** Where the question goes, and what it is. */
  readonly ask: string;
  readonly question: Record<string, unknown>;
  /** An answer worth keeping, from a decoded message, or null. */
  readonly pick: (answer: Record<string, unknown>) => T | null;
  readonly waitMs: number;
}

export async function askAround<T>(bus: Bus, o: AskAround<T>): Promise<T[]> {
  const got: T[] = [];
  const sub = bus.subscribe(o.listen, (_s, d) => {
    try {
      const v = decodeValue(d);
      const kept = v && typeof v === 'object' && !Array.isArray(v) ? o.pick(v as Record<string, unknown>) : null;
      if (kept !== null) got.push(kept);
    } catch {
      /* not an answer */
    }
  });
  try {
    await bus.flush();
    bus.publish(o.ask, encodeValue(o.question));
    await bus.flush();
    await new Promise((r) => setTimeout(r, o.waitMs));
  } finally {
    sub.unsubscribe();
  }
  return got;
}
