// One job name per NATS system: a job's subjects (baton.<job>.…) would mix two runs that
// share a name. A launcher claims its job by answering on baton.<job>.claim for as long as
// it runs, and asks there first: an answer from another launcher means the name is taken.
// Node agents answer too for as long as they host a job's stages.
// The answer comes from the launcher's event loop, so a launcher that computes stages in
// its own process cannot give it in the middle of a long task (docs/operations.md, "Job names and claims").

import { randomBytes } from 'crypto';
import * as os from 'os';
import { Bus, Subscription } from '../transport/bus';
import { askAround } from '../transport/ask-around';
import { decodeValue, encodeValue } from '../transport/codec';
import { peerText } from '../base/quote';
import { EXIT_INPUT } from '../base/errors';
import { JobError } from './wire-stage';

/** A job's name claim lies under the job's own prefix, so the permission on baton.<job>.> covers it. */
export const claimSubject = (job: string) => `baton.${job}.claim`;
/** The only reply subject a claim is answered on: the one claimJob makes. Anything else
 * (a 5 KB subject gets the answerer's connection dropped by the server) is ignored. */
function isClaimReply(job: string, reply: string): boolean {
  const prefix = `${claimSubject(job)}.reply.`;
  return reply.startsWith(prefix) && /^[0-9a-f]{12}$/.test(reply.slice(prefix.length));
}

export class JobNameTakenError extends JobError {
  override name = 'JobNameTakenError';
  override readonly exitStatus = EXIT_INPUT;
}

/**
 * Claim `job` on the bus; resolves with the release once no other launcher answered within
 * `waitMs`, or rejects with JobNameTakenError naming the holder. Claiming before asking
 * means two launchers that start together see each other (both refuse, neither mixes).
 */
export async function claimJob(bus: Bus, job: string, waitMs = 300): Promise<() => void> {
  const token = randomBytes(6).toString('hex');
  const inbox = `${claimSubject(job)}.reply.${token}`;
  const claim = answerJobClaims(bus, job, { token, pid: process.pid, host: os.hostname() });
  let others: Record<string, unknown>[];
  try {
    others = await askAround(bus, {
      listen: inbox,
      ask: claimSubject(job),
      question: { reply: inbox, token },
      waitMs,
      pick: (a) => (a.token !== token ? a : null),
    });
  } catch (err) {
    claim.unsubscribe();
    throw err;
  }
  if (others.length > 0) {
    claim.unsubscribe();
    // A launcher's answer first: it names the run that holds the name.
    const o = others.find((a) => a.node === undefined) ?? others[0];
    // The answer is a peer's: none of its values is trusted to print.
    if (o.node === undefined)
      throw new JobNameTakenError(
        `job ${job} is already running on this NATS system (launcher pid ${peerText(o.pid)} on ${peerText(o.host)}), or a peer squatting on the name answered: launchers hold no key in common to tell a genuine claim from a stranger's (server permissions on baton.<job>.> do: docs/operations.md); give this run another --job NAME`,
      );
    const lease = Number.isSafeInteger(o.leaseMs)
      ? `; they are dropped once their launcher has not renewed them for ${o.leaseMs as number} ms`
      : '';
    throw new JobNameTakenError(
      `job ${job}'s stages are still hosted by node agent ${peerText(o.node)} (pid ${peerText(o.pid)} on ${peerText(o.host)}), left by a launcher that stopped without finishing${lease}; wait, or give this run another --job NAME`,
    );
  }
  return () => claim.unsubscribe();
}

/**
 * Answer every other claim of `job` with `me` (a launcher, or a node agent hosting the
 * job's stages: stages a killed launcher left behind would take a new run's messages).
 */
export function answerJobClaims(bus: Bus, job: string, me: Record<string, unknown>): Subscription {
  return bus.subscribe(claimSubject(job), (_s, d) => {
    try {
      const q = decodeValue(d) as { reply?: unknown; token?: unknown };
      if (
        q &&
        typeof q.reply === 'string' &&
        (me.token === undefined || q.token !== me.token) &&
        isClaimReply(job, q.reply)
      )
        bus.publish(q.reply, encodeValue(me));
    } catch {
      /* not a question */
    }
  });
}
