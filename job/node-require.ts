// Requirements on nodes: `key=value` pairs a node must meet to be used (`--require
// gpu=h200,rack=a`). A key is one of the node's tags (`baton node --tag k=v`), or
// `backend`, the tfjs backend it computes on. A pure function over plain data.

import { InputError } from '../base/errors';
import { TOKEN_RE } from '../base/token';
import { NodeCapabilities, checkTagValue } from '../actors/node-capabilities';

export class RequireError extends InputError {
  override name = 'RequireError';
}

export type Requirements = Readonly<Record<string, string>>;

/** `k=v` pairs (a flag's list), checked: keys are tokens, each given once. */
export function parseRequirements(pairs: readonly string[], what: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of pairs) {
    const eq = pair.indexOf('=');
    const k = pair.slice(0, eq);
    const val = pair.slice(eq + 1);
    if (eq < 1 || !TOKEN_RE.test(k) || !checkTagValue(val))
      throw new RequireError(
        `${what} takes key=value pairs (key [A-Za-z0-9_-]+, a printable value), got ${JSON.stringify(pair)}`,
      );
    if (k in out) throw new RequireError(`${what} gives ${k} twice`);
    out[k] = val;
  }
  return out;
}

/** What `c` has under key `k`: a tag, or its backend. */
const valueOf = (c: NodeCapabilities, k: string): string | undefined =>
  k === 'backend' ? c.backend : Object.prototype.hasOwnProperty.call(c.tags, k) ? c.tags[k] : undefined;

/** The requirements `c` does not meet, as `k=v (has …)` texts; empty when it meets them all. */
export function unmet(c: NodeCapabilities, req: Requirements): string[] {
  return Object.entries(req)
    .filter(([k, want]) => valueOf(c, k) !== want)
    .map(([k, want]) => `${k}=${want} (has ${valueOf(c, k) ?? 'none'})`);
}

/** The nodes meeting `req`, or an error naming, for each node, what it lacks. */
export function nodesMeeting<T extends { capabilities: NodeCapabilities }>(
  nodes: readonly T[],
  req: Requirements,
  needed: number,
): T[] {
  const fit = nodes.filter((n) => unmet(n.capabilities, req).length === 0);
  if (fit.length >= needed) return fit;
  const wanted = Object.entries(req).map(([k, val]) => `${k}=${val}`);
  const why = nodes.map((n) => `${n.capabilities.node}: ${unmet(n.capabilities, req).join(', ') || 'meets them'}`);
  throw new RequireError(
    `${needed} node(s) needed${wanted.length ? ` meeting ${wanted.join(', ')}` : ''}; ${fit.length} found` +
      (nodes.length ? ` (${why.join('; ')})` : ' (no baton-node service answered)'),
  );
}

/** `--nodes discover`: the word that asks the launcher to find its nodes through the services API. */
export const DISCOVER = 'discover';

/**
 * The nodes a discovering launcher uses for `stages` stages: those meeting `req`; when more
 * meet them than there are stages, the fastest (calibrated stage GFLOP/s, ties by name);
 * listed in name order, so the stages are dealt to them in blocks as to named nodes.
 */
export function pickNodes<T extends { capabilities: NodeCapabilities }>(
  nodes: readonly T[],
  req: Requirements,
  stages: number,
): T[] {
  const byName = (a: T, b: T) => (a.capabilities.node < b.capabilities.node ? -1 : 1);
  const fit = nodesMeeting(nodes, req, 1);
  return [...fit]
    .sort((a, b) => b.capabilities.gflops_stage - a.capabilities.gflops_stage || byName(a, b))
    .slice(0, stages)
    .sort(byName);
}
