// Which agents host a job's stages, and at what speed: the ones `--nodes` names, or those
// `--nodes discover` finds as the NATS service baton-node. A training job placed `auto`
// with one agent per stage and no --node-speeds is placed on the speeds the agents measured
// themselves (job/discovered-placement.ts), which the speed-aware partition then splits by;
// what was chosen is said on stderr and recorded in the config (the JSON's placement and
// stage_speeds).

import { JobConfig } from '../job/config';
import { NatsBus } from '../transport/nats-bus';
import { NODE_SERVICE_DEFAULTS } from '../job/defaults';
import { DiscoveredNode, discoverNodes } from '../job/node-discovery';
import { DISCOVER, pickNodes } from '../job/node-require';
import { MeasuredNode, agentsNeeded, placeOnMeasured, unplacedBecause } from '../job/discovered-placement';
import { laneName, lanesOf } from '../transport/lanes';
import { uniformStageFlops } from '../models/train-config';
import { printable } from './table';

export interface Hosts {
  /** The job, placed when it was placed here. */
  readonly cfg: JobConfig;
  /** The agent of each block of stages (of each stage, when placed). */
  readonly names: string[];
}

const say = (cfg: JobConfig, line: string) => process.stderr.write(`${cfg.train ? 'train' : 'run'}: ${line}\n`);

/** The agents `nodes` names or finds (nodes: --nodes; null: the launcher's own, `own`). */
export async function hostsOf(
  cfg: JobConfig,
  o: { nodes?: readonly string[]; require?: Record<string, string>; nats: NatsBus; own: string[] },
): Promise<Hosts> {
  if (!o.nodes) return { cfg, names: o.own };
  if (o.nodes.length === 1 && o.nodes[0] === DISCOVER) {
    const found = await discovered(cfg, o.nats);
    const picked = pickNodes(found.nodes, o.require ?? {}, agentsNeeded(cfg));
    say(
      cfg,
      `discovered ${found.nodes.length} node(s)${found.rejected.count ? ` (${found.rejected.count} answer(s) rejected)` : ''}; using ${picked.map((n) => n.capabilities.node).join(', ')}`,
    );
    return onMeasured(
      cfg,
      picked.map((n) => n.capabilities),
    );
  }
  if (cfg.placement) return { cfg, names: [...cfg.placement] };
  // Named agents: their measured speeds are asked for only when they would place the job.
  const unmeasured = o.nodes.map((node) => ({ node, gflops_stage: 1 }));
  if (unplacedBecause(cfg, unmeasured) !== null) return { cfg, names: [...o.nodes] };
  const found = await discovered(cfg, o.nats);
  const byName = new Map(found.nodes.map((n) => [n.capabilities.node, n.capabilities]));
  const missing = o.nodes.filter((n) => !byName.has(n));
  if (missing.length) {
    say(
      cfg,
      `${missing.join(', ')} did not answer as the NATS service baton-node, so the agents' speeds are unknown; the stages are dealt at equal speeds (give --node-speeds to place them)`,
    );
    return { cfg, names: [...o.nodes] };
  }
  return onMeasured(
    cfg,
    o.nodes.map((n) => byName.get(n) as MeasuredNode),
  );
}

function discovered(
  cfg: JobConfig,
  nats: NatsBus,
): Promise<{ nodes: readonly DiscoveredNode[]; rejected: { count: number } }> {
  return discoverNodes(nats.connection, {
    waitMs: NODE_SERVICE_DEFAULTS.discoverMs,
    log: (l) => say(cfg, printable(l)),
  });
}

/** `cfg` placed on the measured speeds of `nodes` when it is to be; else the nodes as dealt. */
function onMeasured(cfg: JobConfig, nodes: readonly MeasuredNode[]): Hosts {
  const why = unplacedBecause(cfg, nodes);
  if (why !== null) return { cfg, names: nodes.map((n) => n.node) };
  const train = cfg.train as NonNullable<JobConfig['train']>;
  const placed = placeOnMeasured(cfg, nodes, uniformStageFlops(train, cfg.stages, cfg.chunks));
  const names = [...(placed.placement as readonly string[])];
  const gflops = new Map(nodes.map((n) => [n.node, n.gflops_stage]));
  const where = actorNames(cfg).map((actor, k) => {
    const speed = placed.stageSpeeds ? `, speed ${placed.stageSpeeds[k]}` : '';
    return `stage ${actor} on ${names[k]} (${gflops.get(names[k])} GFLOP/s${speed})`;
  });
  const split = placed.stageSpeeds
    ? cfg.partition === 'speed'
      ? 'by speed'
      : 'uniformly (--partition uniform)'
    : 'uniformly (a wide job)';
  say(cfg, `placed by the agents' measured speeds: ${where.join(', ')}; layers split ${split}`);
  return { cfg: placed, names };
}

/** The stage actors in block order: `2`, or `2.r1.d0` in a wide job. */
const actorNames = (cfg: JobConfig): string[] =>
  lanesOf(cfg.tp, cfg.dp).flatMap((l) =>
    Array.from({ length: cfg.stages }, (_, s) => laneName(s, cfg.tp > 1 || cfg.dp > 1 ? l : undefined)),
  );
