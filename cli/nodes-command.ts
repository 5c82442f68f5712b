// `baton nodes`: the node agents of a NATS system, found through the services API
// (`$SRV.INFO.baton-node`, job/node-discovery.ts), with their measured capabilities and
// what they host; answers that do not check out are left out, counted and named.

import { NODE_SERVICE_DEFAULTS } from '../job/defaults';
import { DiscoveredNode, discoverNodes } from '../job/node-discovery';
import { unmet } from '../job/node-require';
import { NatsBus } from '../transport/nats-bus';
import { FlagSpec, HELP_FLAG, helpText, msFlag, parseFlags, printedHelp } from './args';
import { requirementsFlag } from './node-service-flags';
import { NATS_URL_FORMS, natsUrlOf } from './nats-flag';
import { formatTable, printable } from './table';

const NODES_FLAGS: readonly FlagSpec[] = [
  {
    name: 'nats',
    type: 'string',
    metavar: 'URL',
    help: `NATS server(s): ${NATS_URL_FORMS} (default: BATON_NATS_URL or NATS_URL from the environment, else ${NODE_SERVICE_DEFAULTS.nats})`,
  },
  {
    name: 'require',
    type: 'list',
    metavar: 'K=V,…',
    help: 'list only the nodes meeting these: a tag (gpu=h200) or backend=NAME',
  },
  {
    name: 'wait-ms',
    type: 'int',
    metavar: 'MS',
    help: 'how long to gather the services’ answers',
    default: NODE_SERVICE_DEFAULTS.discoverMs,
  },
  { name: 'json', type: 'bool', help: 'print one JSON object: {nodes: [...], rejected, rejections}' },
  HELP_FLAG,
];

export const NODES_HELP =
  helpText(
    'nodes',
    'list the node agents of a NATS system (the baton-node service) with their measured capabilities',
    'baton nodes [--nats URL] [--require K=V,…] [--wait-ms MS] [--json]',
    NODES_FLAGS,
  ) +
  "\nAny NATS client finds the same nodes: nats req '$SRV.INFO.baton-node' (or PING, STATS). An answer that does not fit the schema (a negative or huge speed, a wrong type) is left out and counted as rejected.\n";

/** One node as `baton nodes --json` prints it. */
function nodeJson(n: DiscoveredNode) {
  return { ...n.capabilities, service_id: n.id, hosting: n.hosting?.jobs ?? null };
}

const gib = (b: number) => `${(b / 2 ** 30).toFixed(1)} GiB`;

function nodesTable(nodes: readonly DiscoveredNode[], rejected: number): string {
  const rows = nodes.map(({ capabilities: c, hosting }) =>
    [
      c.node,
      `${c.host}:${c.pid}`,
      c.backend,
      c.gflops_matmul.toFixed(2),
      c.gflops_stage.toFixed(2),
      String(c.cores),
      gib(c.memory_bytes),
      gib(c.free_heap_bytes),
      c.version,
      Object.entries(c.tags)
        .map(([k, v]) => `${k}=${v}`)
        .join(',') || '-',
      hosting === null ? '?' : hosting.jobs.map((j) => `${j.job}[${j.stages.join(',')}]`).join(' ') || '-',
    ].map(printable),
  );
  return (
    formatTable(
      [
        'node',
        'host:pid',
        'backend',
        'matmul GFLOP/s',
        'stage GFLOP/s',
        'cores',
        'memory',
        'free heap',
        'version',
        'tags',
        'hosting',
      ],
      rows,
    ) + `\n${nodes.length} node(s)${rejected ? `; ${rejected} answer(s) rejected (see stderr)` : ''}`
  );
}

export async function nodesCommand(argv: readonly string[], out: (s: string) => void): Promise<number> {
  const { flags } = parseFlags(argv, NODES_FLAGS, 'nodes');
  if (printedHelp(flags, NODES_HELP, out)) return 0;
  const waitMs = msFlag(flags.waitMs, 'nodes', 'wait-ms');
  const req = requirementsFlag(flags.require, 'nodes: --require');
  const url = natsUrlOf(flags.nats, 'nodes') ?? NODE_SERVICE_DEFAULTS.nats;
  const bus = await NatsBus.connect(url, { name: 'baton-nodes' });
  try {
    const found = await discoverNodes(bus.connection, {
      waitMs,
      log: (l) => process.stderr.write(`${printable(l)}\n`),
    });
    const nodes = found.nodes.filter((n) => unmet(n.capabilities, req).length === 0);
    if (flags.json)
      out(
        JSON.stringify({
          nodes: nodes.map(nodeJson),
          rejected: found.rejected.count,
          rejections: found.rejected.first,
        }),
      );
    else out(nodesTable(nodes, found.rejected.count));
    return 0;
  } finally {
    await bus.close();
  }
}
