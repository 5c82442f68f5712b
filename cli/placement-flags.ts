// --node-speeds, --placement and --partition of sim, run and train: the nodes a job places
// its stages on (the running agents --nodes names, else node0, node1, …, with the given
// speeds), where each stage goes (job/placement.ts), and whether layers are split by the
// stages' speeds. With --nodes and speeds each stage gets a node of its own, and the
// launcher hands stage s to the agent the placement names for it (cfg.placement).

import { JobConfig } from '../job/config';
import { partitionProfile } from '../models/durations';
import { loadProfile } from '../models/profile';
import { PLACEMENT_DEFAULTS } from '../job/defaults';
import { placeStages } from '../job/placement';
import { FlagSpec, UsageError } from './args';

export const PLACEMENT_FLAGS: readonly FlagSpec[] = [
  {
    name: 'node-speeds',
    type: 'list',
    metavar: 'S0,S1,…',
    help: 'relative speed of nodes node0, node1, … (with --nodes: of those agents, in their order, e.g. from baton calibrate): emulated compute on a node of speed s takes 1/s as long, and a speed-aware partition gives its stage s times the work (default: one node of speed 1 per stage)',
  },
  {
    name: 'placement',
    type: 'string',
    metavar: 'auto|0=N,1=N,…',
    help: 'the node of each stage: auto (the heaviest stages on the fastest nodes) or stage=node pairs',
    default: PLACEMENT_DEFAULTS.placement,
  },
  {
    name: 'partition',
    type: 'string',
    help: "speed: layers split in proportion to the stages' node speeds (FLOPs / speed balanced); uniform: split evenly whatever the speeds",
    choices: ['speed', 'uniform'],
    default: PLACEMENT_DEFAULTS.partition,
  },
];

/** --placement's text: auto, or stage=node pairs. */
function placementFlag(text: string): 'auto' | Record<string, string> {
  if (text === 'auto') return 'auto';
  const map: Record<string, string> = {};
  for (const pair of text.split(',')) {
    const m = /^([0-9]+)=([A-Za-z0-9_-]+)$/.exec(pair.trim());
    if (!m)
      throw new UsageError(`--placement takes auto or stage=node pairs (0=node0,1=node1), got ${JSON.stringify(pair)}`);
    if (m[1] in map) throw new UsageError(`--placement names stage ${m[1]} twice`);
    map[m[1]] = m[2];
  }
  return map;
}

function speedsFlag(raw: readonly string[]): number[] {
  return raw.map((x) => {
    const n = Number(x);
    if (!/^[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$/.test(x) || !(n > 0 && Number.isFinite(n)))
      throw new UsageError(`--node-speeds takes positive numbers, got ${JSON.stringify(x)}`);
    return n;
  });
}

/** The nodes a job is placed on and their speeds: the --nodes agents or node0, node1, … */
function placementNodes(
  flags: Readonly<Record<string, unknown>>,
  stages: number,
): { names: string[]; speeds: number[] } {
  const raw = flags.nodeSpeeds as string[] | undefined;
  const agents = flags.nodes as string[] | undefined;
  if (agents) {
    const speeds = raw ? speedsFlag(raw) : agents.map(() => 1);
    if (speeds.length !== agents.length)
      throw new UsageError(
        `--node-speeds gives ${speeds.length} speeds for the ${agents.length} agents of --nodes (${agents.join(',')}); one each, in order`,
      );
    if (agents.length !== stages)
      throw new UsageError(
        `--nodes with --node-speeds or --placement places one stage per agent: ${stages} stages need ${stages} agents, ${agents.length} given`,
      );
    return { names: agents, speeds };
  }
  const speeds = raw ? speedsFlag(raw) : new Array<number>(stages).fill(1);
  return { names: speeds.map((_, k) => `node${k}`), speeds };
}

/**
 * `cfg` placed as the flags say: stage speeds, the node of each stage and the partition.
 * Without node speeds or a placement, nothing is placed (every stage at speed 1; --nodes
 * agents get the stages in contiguous blocks).
 * `work` gives each stage's work at equal speeds, for auto (asked only when needed).
 */
export function placedConfig(
  flags: Readonly<Record<string, unknown>>,
  cfg: JobConfig,
  work: () => readonly number[],
): JobConfig {
  const partition = flags.partition as 'uniform' | 'speed';
  const placement = placementFlag(String(flags.placement));
  if (!flags.nodeSpeeds && placement === 'auto') return { ...cfg, partition };
  if (flags.nodes && (cfg.tp > 1 || cfg.dp > 1))
    throw new UsageError(
      `--nodes with --tp ${cfg.tp} --dp ${cfg.dp}: each agent hosts one stage actor, in the order --nodes names them (replica, rank, stage), or auto on the speeds the agents measured; no --node-speeds or stage map`,
    );
  const { names, speeds } = placementNodes(flags, cfg.stages);
  const sameSpeeds = speeds.every((s) => s === speeds[0]);
  const placed = placeStages({
    stages: cfg.stages,
    nodes: names,
    speeds,
    placement,
    work: placement === 'auto' && !sameSpeeds ? work() : new Array<number>(cfg.stages).fill(1),
  });
  return { ...cfg, partition, stageSpeeds: placed.speeds, placement: placed.nodes };
}

/** Each physical stage's forward ms under the profile's uniform partition (emulated compute's work). */
export function emulatedStageWork(cfg: JobConfig): number[] {
  const { forwardMs } = partitionProfile(loadProfile(cfg.profile), cfg.stages, cfg.chunks);
  const work = new Array<number>(cfg.stages).fill(0);
  forwardMs.forEach((ms, v) => (work[v % cfg.stages] += ms));
  return work;
}
