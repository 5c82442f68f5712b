// Finding the node agents of a NATS system through the services API: one
// `$SRV.INFO.baton-node` and one `$SRV.STATS.baton-node` request, every answer gathered
// for a while. Each answer is checked on its own (actors/node-capabilities.ts): one that
// is not JSON, does not fit the schema, or names a node another answer names too is left
// out, counted and described, and the others are kept. Nothing here throws on what a peer
// sends; only a connection that fails makes discovery fail.
//
// nats.js's own service client is not used for reading: one answer that is not JSON ends
// its whole listing, so a stranger could hide every node.

import type { Msg, NatsConnection } from '@nats-io/transport-node';
import { quoteValue } from '../base/quote';
import { RejectTally, newRejectTally, tallyReject } from '../base/reject-tally';
import { NODE_SERVICE_NAME, NodeCapabilities, parseNodeInfo } from '../actors/node-capabilities';
import { NodeHosting } from './node-service';

export interface DiscoveredNode {
  /** The service instance's id (a new one after every re-measure). */
  readonly id: string;
  readonly capabilities: NodeCapabilities;
  /** What it hosts, from its STATS; null when it sent none that could be read. */
  readonly hosting: NodeHosting | null;
}

export interface Discovery {
  /** In node-name order. */
  readonly nodes: readonly DiscoveredNode[];
  /** Answers left out (and names claimed by several services, once each), with the first ones described. */
  readonly rejected: RejectTally;
}

/** Answers gathered at most per request: a flood of responders cannot grow the reader without bound. */
export const MAX_ANSWERS = 4096;

/** Every answer to `subject` within `waitMs`, as raw messages (none when nobody answers). */
async function gather(nc: NatsConnection, subject: string, waitMs: number): Promise<Msg[]> {
  const out: Msg[] = [];
  try {
    const it = await nc.requestMany(subject, '', { strategy: 'timer', maxWait: waitMs, maxMessages: MAX_ANSWERS });
    for await (const m of it) out.push(m);
  } catch (err) {
    // No responders is an empty system; anything else is the connection's problem.
    if (!/no responders|503/i.test(String((err as Error).message))) throw err;
  }
  return out;
}

function json(m: Msg): unknown {
  try {
    return JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(m.data)) as unknown;
  } catch {
    return undefined;
  }
}

/** The hosting data of one STATS answer, when it reads as such. */
function hostingOf(stats: unknown): { id: string; hosting: NodeHosting } | null {
  if (typeof stats !== 'object' || stats === null) return null;
  const s = stats as { id?: unknown; endpoints?: unknown };
  if (typeof s.id !== 'string' || !Array.isArray(s.endpoints)) return null;
  const data = (s.endpoints as { name?: unknown; data?: unknown }[]).find((e) => e?.name === 'hosting')?.data;
  const jobs = (data as { jobs?: unknown } | undefined)?.jobs;
  if (!Array.isArray(jobs) || jobs.length > 1000) return null;
  const ok = jobs.every(
    (j: { job?: unknown; stages?: unknown }) =>
      typeof j?.job === 'string' &&
      j.job.length <= 256 &&
      Array.isArray(j.stages) &&
      j.stages.length <= 4096 &&
      j.stages.every((x) => Number.isSafeInteger(x)),
  );
  return ok ? { id: s.id, hosting: { jobs: jobs as NodeHosting['jobs'] } } : null;
}

/** The nodes that answer within `waitMs` (default 500 ms), and the answers refused. */
export async function discoverNodes(
  nc: NatsConnection,
  o: { waitMs: number; log?: (line: string) => void },
): Promise<Discovery> {
  const log = o.log ?? (() => {});
  const rejected = newRejectTally();
  const refuse = (why: string) => {
    tallyReject(rejected, why);
    log(`nodes: refused a ${NODE_SERVICE_NAME} answer: ${why}`);
  };
  const [infos, stats] = await Promise.all([
    gather(nc, `$SRV.INFO.${NODE_SERVICE_NAME}`, o.waitMs),
    gather(nc, `$SRV.STATS.${NODE_SERVICE_NAME}`, o.waitMs),
  ]);
  const hosting = new Map<string, NodeHosting>();
  for (const m of stats) {
    const h = hostingOf(json(m));
    if (h) hosting.set(h.id, h.hosting);
  }
  const byName = new Map<string, DiscoveredNode[]>();
  for (const m of infos) {
    const answer = json(m);
    if (answer === undefined) {
      refuse(`not JSON (${m.data.length} bytes)`);
      continue;
    }
    const r = parseNodeInfo(answer);
    if (!r.ok) {
      refuse(r.reason);
      continue;
    }
    const node = { id: r.id, capabilities: r.capabilities, hosting: hosting.get(r.id) ?? null };
    byName.set(node.capabilities.node, [...(byName.get(node.capabilities.node) ?? []), node]);
  }
  const nodes: DiscoveredNode[] = [];
  for (const [name, same] of [...byName].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    // Two services claiming one name: which is the agent cannot be told from here.
    if (same.length > 1) {
      refuse(
        `node ${quoteValue(name)} is claimed by ${same.length} services (ids ${same.map((n) => n.id).join(', ')})`,
      );
      continue;
    }
    nodes.push(same[0]);
  }
  return { nodes, rejected };
}
