// --nodes, --require and --node-key-file of run and train: running node agents (baton node)
// that host the job's stages instead of stage processes this launcher starts (named, or
// `discover`ed as NATS services meeting --require), and the key they hold.

import { MAX_NODE_NAME, NODE_NAME_RE } from '../actors/node-protocol';
import { FlagSpec, UsageError } from './args';
import { readKeyFile } from './key-file';
import { DISCOVER, parseRequirements } from '../job/node-require';

export const AGENT_FLAGS: readonly FlagSpec[] = [
  {
    name: 'nodes',
    type: 'list',
    metavar: 'N1,N2,…',
    help: `use running node agents (baton node) instead of spawning them: one stage per agent where --node-speeds and --placement place it; without them, a train with one agent per stage is placed on the speeds the agents measured, else stages are dealt in contiguous blocks. ${DISCOVER}: the agents that answer as the NATS service baton-node and meet --require (the fastest, when more than the stages)`,
  },
  {
    name: 'require',
    type: 'list',
    metavar: 'K=V,…',
    help: `with --nodes ${DISCOVER}: use only nodes with these tags (gpu=h200) or backend=NAME`,
  },
  {
    name: 'node-key-file',
    type: 'string',
    metavar: 'FILE',
    help: 'with --nodes: the key file those agents were started with (baton node --key-file); every message is sealed under it',
  },
];

export interface AgentSetup {
  nodes?: string[];
  require?: Record<string, string>;
  nodeKey?: Uint8Array;
}

/** --nodes and --node-key-file, checked against the transport, the processes, the server and the stages. */
export function agentSetupOf(
  flags: Readonly<Record<string, unknown>>,
  command: string,
  o: {
    transport: string;
    processes: string;
    natsUrl: string | undefined;
    shape: { stages: number; tp: number; dp: number };
    jobKey: boolean;
  },
): AgentSetup {
  const nodes = flags.nodes as string[] | undefined;
  const nodeKey =
    flags.nodeKeyFile !== undefined ? readKeyFile(String(flags.nodeKeyFile), `${command}: --node-key-file`) : undefined;
  if (o.transport === 'local' && nodes) throw new UsageError(`${command}: --nats and --nodes need --transport nats`);
  if (!nodes && nodeKey) throw new UsageError(`${command}: --node-key-file goes with --nodes`);
  const discover = nodes?.length === 1 && nodes[0] === DISCOVER;
  if (flags.require !== undefined && !discover)
    throw new UsageError(`${command}: --require goes with --nodes ${DISCOVER}`);
  if (!nodes) return {};
  if (o.processes === 'single')
    throw new UsageError(`${command}: --nodes runs the stages on those nodes; it takes no --processes single`);
  checkNodes(nodes, o.natsUrl, o.shape, command);
  if (!nodeKey)
    throw new UsageError(
      `${command}: --nodes needs --node-key-file FILE, the key file those node agents were started with (baton node --key-file)`,
    );
  if (o.jobKey)
    throw new UsageError(
      `${command}: --key-file seals a job over NATS whose stages this launcher starts; with --nodes the key is --node-key-file`,
    );
  if (discover && (flags.nodeSpeeds !== undefined || (flags.placement !== undefined && flags.placement !== 'auto')))
    throw new UsageError(
      `${command}: --nodes ${DISCOVER} picks the nodes and places the stages by the speeds the nodes measured; it takes no --node-speeds or stage map (name the agents with --nodes to place stages on them)`,
    );
  return {
    nodes,
    nodeKey,
    ...(flags.require !== undefined
      ? { require: parseRequirements(flags.require as string[], `${command}: --require`) }
      : {}),
  };
}

/** --nodes: valid distinct agent names on a server given with --nats, no more than the stages. */
function checkNodes(
  nodes: readonly string[],
  natsUrl: string | undefined,
  shape: { stages: number; tp: number; dp: number },
  command: string,
): void {
  const { stages, tp, dp } = shape;
  if (nodes.includes(DISCOVER) && nodes.length > 1)
    throw new UsageError(`${command}: --nodes ${DISCOVER} finds the nodes itself; it takes no names beside it`);
  for (const n of nodes) {
    if (!NODE_NAME_RE.test(n))
      throw new UsageError(
        `${command}: --nodes: node names match [A-Za-z0-9_-]+ (as baton node --name), got ${JSON.stringify(n)}`,
      );
    if (n.length > MAX_NODE_NAME)
      throw new UsageError(
        `${command}: --nodes: a node name is at most ${MAX_NODE_NAME} characters (as baton node --name), got one of ${n.length}`,
      );
  }
  if (new Set(nodes).size !== nodes.length)
    throw new UsageError(`${command}: --nodes names a node twice: ${nodes.join(',')}`);
  if (!natsUrl)
    throw new UsageError(
      `${command}: --nodes needs --nats URL, the server those node agents joined (without it the run starts a private server no agent knows)`,
    );
  const actors = stages * tp * dp;
  if (actors > stages && nodes[0] !== DISCOVER && nodes.length !== actors)
    throw new UsageError(
      `${command}: a job of ${stages} stages × ${tp} ranks × ${dp} replicas takes one agent per stage actor, ${actors} (in replica, rank, stage order); --nodes names ${nodes.length}`,
    );
  if (actors === stages && nodes.length > stages)
    throw new UsageError(
      `${command}: --nodes names ${nodes.length} agents for ${stages} stages; each agent hosts at least one stage, so ${nodes.slice(stages).join(',')} would get none`,
    );
}
