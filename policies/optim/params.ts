// Named parameters as plain Float32Arrays, shared by the optimizers, the clipper and
// the consistency policies. A parameter is a row-major tensor with an explicit shape;
// nothing here knows about tfjs, actors or the bus.

export interface ParamInfo {
  readonly name: string;
  /** Row-major shape, e.g. [dout, din + 1] for a linear layer with its bias as the last column. */
  readonly shape: readonly number[];
  /** Apply decoupled weight decay to this parameter (default true; nanoGPT turns it off for norms and biases). */
  readonly decay?: boolean;
}

/** Parameters or gradients or updates by name. */
export type ParamMap = ReadonlyMap<string, Float32Array>;

export class ParamError extends Error {
  override name = 'ParamError';
}

export function sizeOf(shape: readonly number[]): number {
  let n = 1;
  for (const s of shape) {
    if (!Number.isInteger(s) || s < 0) throw new ParamError(`bad dimension ${s} in shape [${shape.join(', ')}]`);
    n *= s;
  }
  return n;
}

/** The array for `name` in `map`, checked against the expected length; `where` leads the error. */
export function lookup(map: ParamMap, name: string, size: number, where: string): Float32Array {
  const a = map.get(name);
  if (a === undefined)
    throw new ParamError(`${where}: no entry for parameter "${name}"; have [${[...map.keys()].join(', ')}]`);
  if (a.length !== size)
    throw new ParamError(`${where}: parameter "${name}" has ${a.length} elements, expected ${size}`);
  return a;
}

/** params[name] += updates[name] for every update (float32 arithmetic, in place). */
export function applyUpdates(params: ParamMap, updates: ParamMap): void {
  for (const [name, d] of updates) {
    const p = lookup(params, name, d.length, 'applyUpdates');
    for (let i = 0; i < p.length; i++) p[i] += d[i];
  }
}
