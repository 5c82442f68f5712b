// The client side of a job's policy control (actors/policy-messages.ts): ask the job's
// policy actor for a swap or for its view, over any bus, and wait for its answers.

import { randomBytes } from 'crypto';
import { Bus } from '../transport/bus';
import { decodeValue, encodeValue } from '../transport/codec';
import { policySubject } from '../actors/policy-messages';
import { BatonError } from '../base/errors';

/** No policy actor of the job answered in time: the job is not running on this server (or ended). */
export class NoAnswerError extends BatonError {
  override name = 'NoAnswerError';
}

/** A conversation with a job's policy actor: its answers, in the order they come. */
async function converse(
  bus: Bus,
  job: string,
  verb: 'set' | 'get',
  body: Record<string, unknown>,
  until: (answers: Record<string, unknown>[]) => boolean,
  waitMs: number,
): Promise<Record<string, unknown>[]> {
  const replyTo = policySubject(job, 'reply', randomBytes(8).toString('hex'));
  const answers: Record<string, unknown>[] = [];
  let done: () => void = () => {};
  const finished = new Promise<void>((r) => (done = r));
  const sub = bus.subscribe(replyTo, (_s, d) => {
    try {
      const v = decodeValue(d);
      if (v && typeof v === 'object' && !Array.isArray(v)) answers.push(v as Record<string, unknown>);
    } catch {
      return; // not an answer: ignored
    }
    if (until(answers)) done();
  });
  let timer: NodeJS.Timeout | undefined;
  try {
    await bus.flush();
    bus.publish(policySubject(job, verb), encodeValue({ verb, replyTo, ...body }));
    await Promise.race([finished, new Promise<void>((r) => (timer = setTimeout(r, waitMs)))]);
  } finally {
    clearTimeout(timer);
    sub.unsubscribe();
  }
  return answers;
}

export interface SetOutcome {
  /** The actor's answer: {ok, swap, from, to, atIteration} or {ok: false, error}. */
  readonly answer: Record<string, unknown>;
  /** The log entry once every stage adopted it (latencyMs, adopted), or null when it did not within the wait. */
  readonly adopted: Record<string, unknown> | null;
  /** Request publish -> adoption answer, ms on this process's clock. */
  readonly roundTripMs: number | null;
}

export async function requestSwap(
  bus: Bus,
  job: string,
  policy: string,
  o: { by: string; waitMs: number; atIteration?: number; what?: 'arbitration' | 'consistency' },
): Promise<SetOutcome> {
  const t0 = performance.now();
  let tAdopted: number | null = null;
  const answers = await converse(
    bus,
    job,
    'set',
    {
      policy,
      by: o.by,
      ...(o.what ? { what: o.what } : {}),
      ...(o.atIteration !== undefined ? { atIteration: o.atIteration } : {}),
    },
    (a) => {
      const ans = a.find((x) => x.verb === 'answer');
      if (a.some((x) => x.verb === 'adopted')) tAdopted ??= performance.now();
      return ans !== undefined && (ans.ok !== true || tAdopted !== null);
    },
    o.waitMs,
  );
  const answer = answers.find((x) => x.verb === 'answer');
  if (!answer)
    throw new NoAnswerError(
      `no policy actor of job ${job} answered within ${o.waitMs / 1000} s (is the job running on this server, and is --key-file the job's key?)`,
    );
  const adopted = answers.find((x) => x.verb === 'adopted') ?? null;
  return { answer, adopted, roundTripMs: tAdopted === null ? null : tAdopted - t0 };
}

export async function requestView(bus: Bus, job: string, waitMs: number): Promise<Record<string, unknown>> {
  const answers = await converse(bus, job, 'get', {}, (a) => a.some((x) => x.verb === 'policy'), waitMs);
  const view = answers.find((x) => x.verb === 'policy');
  if (!view)
    throw new NoAnswerError(
      `no policy actor of job ${job} answered within ${waitMs / 1000} s (is the job running on this server, and is --key-file the job's key?)`,
    );
  return view;
}
