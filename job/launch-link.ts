// A launch's conversation with its node agents (job/distributed-launch.ts): its requests,
// their replies (checked, kept in order), their hellos, and when it last heard from each node.

import { Bus, Subscription } from '../transport/bus';
import { encodeValue } from '../transport/codec';
import { peerText, quoteValue } from '../base/quote';
import { RejectTally, tallyReject } from '../base/reject-tally';
import { NodeSubjects, replyBox } from '../actors/node-agent';
import { Reply, ReplyBox, decodeReply } from './reply-box';
import { replyProblem } from './node-replies';
import { replyFailure } from './launch-checks';

export interface LaunchLinkWiring {
  readonly job: string;
  readonly launch: string;
  /** The nodes the job may use (a reply of another ends nothing). */
  readonly nodes: readonly string[];
  /** Where malformed replies are counted. */
  readonly rejects: RejectTally;
  /** A reply that fails the job goes here. */
  readonly fail: (e: Error) => void;
}

export class LaunchLink {
  readonly replies = new ReplyBox();
  private readonly hellos = new ReplyBox();
  /** When each node was last heard from (Date.now()). */
  readonly heard = new Map<string, number>();
  private readonly replySubject: string;

  constructor(
    private readonly bus: Bus,
    private readonly at: NodeSubjects,
    private readonly w: LaunchLinkWiring,
  ) {
    this.replySubject = replyBox(w.job, w.launch);
  }

  /** Its subscriptions to the replies and the hellos. */
  subscribe(): Subscription[] {
    return [
      this.bus.subscribe(this.replySubject, (subj, d) => this.onReply(subj, d)),
      this.bus.subscribe(this.at.announce, (_s, d) => {
        const r = decodeReply(d);
        if (r && r.verb === 'hello') this.hellos.push(r);
      }),
    ];
  }

  request(node: string, body: Record<string, unknown>): void {
    this.bus.publish(this.at.request(node), encodeValue({ ...body, reply: this.replySubject }));
  }

  private onReply(subj: string, d: Uint8Array): void {
    const r = decodeReply(d);
    if (!r) return;
    const problem = replyProblem(r);
    if (problem !== null) {
      tallyReject(
        this.w.rejects,
        `${quoteValue(subj, 200)}: a ${peerText(r.verb, 40)} reply from node ${peerText(r.name, 200)} refused: ${problem}`,
      );
      return;
    }
    this.heard.set(r.name, Date.now());
    const failure = replyFailure(r, this.w.job, this.w.nodes);
    if (failure) this.w.fail(failure);
    if (r.verb === 'renewed') return;
    this.replies.push(r);
  }

  /** The hellos of every node of `used`: nodes we spawned announce themselves when they start;
   * running ones answer a ping (over a cluster, after a delay: pinged until they answer). */
  async announced(
    used: readonly string[],
    timeoutMs: number,
    unlessFailed: (p: Promise<Reply[]>) => Promise<Reply[]>,
  ): Promise<Reply[]> {
    await this.bus.flush();
    const missing = () => used.filter((n) => !this.hellos.queue.some((r) => r.name === n));
    const pinger: NodeJS.Timeout = setInterval(() => missing().forEach((n) => this.request(n, { verb: 'ping' })), 300);
    try {
      used.forEach((n) => this.request(n, { verb: 'ping' }));
      return await unlessFailed(
        this.hellos.waitFor(
          (rs) => used.every((n) => rs.some((r) => r.name === n)),
          timeoutMs,
          () => `node agents ${missing().join(', ')} to announce themselves`,
        ),
      );
    } finally {
      clearInterval(pinger);
    }
  }

  /** Ends every wait on a reply or a hello. */
  close(): void {
    this.replies.close();
    this.hellos.close();
  }
}
