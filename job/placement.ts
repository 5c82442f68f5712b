// Placement: which node each stage runs on, and so each stage's speed. Given as a map of
// stage to node, or `auto`: the P fastest nodes, the heaviest stage on the fastest node
// (stages of equal work keep their order, and so do nodes of equal speed, so a list of
// speeds for as many nodes as stages, on stages of equal work, places stage s on node s).
//
// A pure function over plain data. The nodes are those a job names with their speeds
// (--node-speeds, a job file's nodes): node0, node1, … of this run, whose stages run where
// the launcher runs them, or the running agents of --nodes, which then host the stages the
// placement gives them. The placement decides the stages' speeds for emulated compute and
// the speed-aware partition, and is recorded in the JSON and the trace.
//
// Not modelled: several stages on one node (refused), nodes that must carry a tag.

import { InputError } from '../base/errors';

export class PlacementError extends InputError {
  override name = 'PlacementError';
}

export interface PlacementInput {
  readonly stages: number;
  /** Node names and their relative speeds, in the same order. */
  readonly nodes: readonly string[];
  readonly speeds: readonly number[];
  /** auto, or the node of each stage by stage number. */
  readonly placement: 'auto' | Readonly<Record<string, string>>;
  /** Each stage's work at equal speeds (for auto), e.g. its forward ms or FLOPs under a uniform partition. */
  readonly work: readonly number[];
}

export interface Placement {
  /** The node of each stage. */
  readonly nodes: readonly string[];
  /** The speed of each stage's node. */
  readonly speeds: readonly number[];
}

/** Indices 0..n-1 sorted by `key` descending, ties in index order. */
const byDescending = (n: number, key: (i: number) => number): number[] =>
  Array.from({ length: n }, (_, i) => i).sort((a, b) => key(b) - key(a) || a - b);

function autoPlacement(i: PlacementInput): number[] {
  if (i.nodes.length < i.stages)
    throw new PlacementError(
      `placement auto: ${i.stages} stages need ${i.stages} nodes, one each; ${i.nodes.length} given (${i.nodes.join(', ')})`,
    );
  const fastest = byDescending(i.nodes.length, (n) => i.speeds[n]).slice(0, i.stages);
  const heaviest = byDescending(i.stages, (s) => i.work[s]);
  const nodeOf = new Array<number>(i.stages);
  // Within a run of stages of equal work, the run's nodes go in node order to stages in stage order.
  for (let k = 0; k < i.stages;) {
    let end = k + 1;
    while (end < i.stages && i.work[heaviest[end]] === i.work[heaviest[k]]) end++;
    const stages = heaviest.slice(k, end).sort((a, b) => a - b);
    const nodes = fastest.slice(k, end).sort((a, b) => a - b);
    stages.forEach((s, j) => (nodeOf[s] = nodes[j]));
    k = end;
  }
  return nodeOf;
}

function givenPlacement(i: PlacementInput, map: Readonly<Record<string, string>>): number[] {
  const index = new Map(i.nodes.map((n, k) => [n, k]));
  const nodeOf = new Array<number>(i.stages);
  for (const [stage, node] of Object.entries(map)) {
    const s = Number(stage);
    if (!(Number.isInteger(s) && s >= 0 && s < i.stages))
      throw new PlacementError(`placement.${stage}: no such stage; the stages are 0..${i.stages - 1}`);
    const k = index.get(node);
    if (k === undefined)
      throw new PlacementError(
        `placement.${stage}: node ${JSON.stringify(node)} is not one of the nodes (${i.nodes.join(', ')})`,
      );
    nodeOf[s] = k;
  }
  for (let s = 0; s < i.stages; s++)
    if (nodeOf[s] === undefined) throw new PlacementError(`placement: stage ${s} has no node`);
  const seen = new Map<number, number>();
  nodeOf.forEach((k, s) => {
    if (seen.has(k))
      throw new PlacementError(
        `placement: node ${i.nodes[k]} is given stages ${seen.get(k)} and ${s}; one stage per node (stages sharing a node are not modelled)`,
      );
    seen.set(k, s);
  });
  return nodeOf;
}

/** The node and speed of every stage. */
export function placeStages(i: PlacementInput): Placement {
  if (i.speeds.length !== i.nodes.length)
    throw new PlacementError(`${i.speeds.length} node speeds for ${i.nodes.length} nodes (${i.nodes.join(', ')})`);
  if (new Set(i.nodes).size !== i.nodes.length)
    throw new PlacementError(`a node is named twice: ${i.nodes.join(', ')}`);
  const nodeOf = i.placement === 'auto' ? autoPlacement(i) : givenPlacement(i, i.placement);
  return { nodes: nodeOf.map((k) => i.nodes[k]), speeds: nodeOf.map((k) => i.speeds[k]) };
}
