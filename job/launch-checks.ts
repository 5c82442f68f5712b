// What a launch refuses or fails on, as pure functions of what it knows: a sealed message
// from a sender that may not send it, and a node's reply that ends the job.

import { parseSubject } from '../transport/subjects';
import { peerText, quoteValue } from '../base/quote';
import { NodeSubjects } from '../actors/node-agent';
import { JobError, NodeInputError, PermissionDeniedError } from './job-errors';
import { Reply, text } from './reply-box';
import { NodeBlock } from './distributed-options';

/** Only the job's agents send to the launcher, and a stage's trace or state comes from the agent hosting it. */
export function launchSenderProblem(
  w: { at: NodeSubjects; nodes: readonly string[]; blocks: readonly NodeBlock[] },
  subj: string,
  sender: string,
): string | null {
  const node = sender.startsWith('node:') ? sender.slice('node:'.length) : null;
  const i = node === null ? -1 : w.nodes.indexOf(node);
  if (subj === w.at.announce && node !== null) return null; // any agent of the key may say hello
  if (i < 0) return `a message sealed by ${quoteValue(sender, 80)}, not by a node agent of this job`;
  if (subj.startsWith(w.at.beat('')) && subj !== w.at.beat(node as string))
    return `a heartbeat on ${quoteValue(subj, 200)} sealed by node ${node}, which beats only for itself`;
  const stage = parseSubject(subj);
  if (
    (stage?.kind === 'trace' || stage?.kind === 'state') &&
    !(w.blocks[i]?.stages ?? []).includes(Number(stage.stage))
  )
    return `a ${stage.kind} message of stage ${quoteValue(stage.stage, 20)} sealed by node ${node}, which does not host it`;
  return null;
}

/** A node's reply that fails the job: an actor failed there, the server refused it a permission, it left, or it no longer hosts the job. */
export function replyFailure(r: Reply, job: string, nodes: readonly string[]): JobError | null {
  if (r.verb === 'failure') return new JobError(`on node ${r.name}, actor ${text(r.actor)} failed: ${text(r.message)}`);
  if (r.verb === 'denied') {
    const stages = Array.isArray(r.stages) ? ` (stages ${r.stages.map((s) => text(s)).join(',')})` : '';
    const op = r.operation === 'subscription' ? 'subscription' : 'publish';
    return new PermissionDeniedError(`node ${r.name}${stages}`, op, text(r.subject), text(r.message));
  }
  if (r.verb === 'leaving') return new JobError(`node ${r.name} left during the job (${text(r.reason)})`);
  // Waiting out a lease would only blame a live node for a job it no longer has.
  if (
    r.verb === 'error' &&
    (r.request === 'renew' || r.request === 'status') &&
    nodes.includes(r.name) &&
    (r.error === 'JobNotHostedError' || r.error === 'LaunchMismatchError')
  )
    return new JobError(`node ${r.name} no longer hosts job ${job}: ${text(r.message)}`);
  return null;
}

/** The nodes' answers to the host requests: a refusal, or an agent that hosted without taking the launch id. */
export function hostingProblem(hosted: readonly Reply[], launch: string): JobError | null {
  const failed = hosted.find((r) => r.verb === 'error');
  if (failed) {
    const message = `node ${failed.name} refused to host: ${text(failed.message)}`;
    return failed.input === true ? new NodeInputError(message) : new JobError(message);
  }
  // An agent that did not take the launch id would send what this run's coordinator refuses.
  const unlaunched = hosted.filter((r) => r.verb === 'hosting' && r.launch !== launch).map((r) => peerText(r.name));
  if (unlaunched.length > 0)
    return new JobError(
      `node(s) ${unlaunched.join(', ')} hosted the job without taking its launch id: an agent older than this launcher? Restart it from the same Baton`,
    );
  return null;
}

/**
 * The reply after the first `from` that ends the wait for the nodes of `used` to finish: an
 * error to finish, or one too big an answer left without a request. No finished will follow.
 */
export function finishRefusal(rs: readonly Reply[], from: number, used: readonly string[]): Reply | undefined {
  return rs
    .slice(from)
    .find((r) => r.verb === 'error' && used.includes(r.name) && (r.request === 'finish' || r.request === undefined));
}
