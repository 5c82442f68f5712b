// Policy names -> HintPolicy objects, including a user module given by path.
//
// Built-in names: the hint orders (bf, fb, b-priority, f-priority, bfw), the fixed
// schedules in binding mode (gpipe, 1f1b, interleaved-1f1b, zb-h1) and the same
// schedules as hints (hint:gpipe, ...). A name that contains '/' or ends in .js is a
// module path (resolved from the working directory), loaded with require; it must
// export a HintPolicy as `default` or `policy`.

import * as path from 'node:path';
import { fixedPolicy } from './fixed';
import { HintPolicy, ReadyView } from './hint';
import { bPriority, bf, bfw, fPriority, fb } from './hints';
import { SCHEDULES } from './schedules/index';
import { ShapeError, Task } from './task';
import { InputError } from '../base/errors';

export class UnknownPolicyError extends InputError {
  override name = 'UnknownPolicyError';
  constructor(readonly policy: string) {
    super(
      `unknown policy ${JSON.stringify(policy)}; known: ${policyNames().join(', ')}, ` +
        `or a module path (contains '/' or ends in .js) exporting a HintPolicy`,
    );
  }
}

export class PolicyModuleError extends InputError {
  override name = 'PolicyModuleError';
  constructor(
    readonly modulePath: string,
    problem: string,
    options?: { cause?: unknown },
  ) {
    super(`policy module ${JSON.stringify(modulePath)}: ${problem}`, options);
  }
}

function builtins(): Map<string, HintPolicy<any>> {
  const all: HintPolicy<any>[] = [bf, fb, bPriority, fPriority, bfw];
  for (const s of SCHEDULES) all.push(fixedPolicy(s, 'binding'));
  for (const s of SCHEDULES) all.push(fixedPolicy(s, 'hint'));
  return new Map(all.map((p) => [p.name, p]));
}

const BUILTINS = builtins();

export function policyNames(): string[] {
  return [...BUILTINS.keys()];
}

export function isModulePath(name: string): boolean {
  return name.includes('/') || name.endsWith('.js');
}

/** Problems with `value` as a HintPolicy, empty when it is one. */
export function policyShapeProblems(value: unknown): string[] {
  if (typeof value !== 'object' || value === null)
    return [`expected an object, got ${value === null ? 'null' : typeof value}`];
  const v = value as Record<string, unknown>;
  const problems: string[] = [];
  const want = (key: string, type: string) => {
    if (typeof v[key] !== type) problems.push(`${key} must be a ${type}, got ${typeof v[key]}`);
  };
  want('name', 'string');
  want('binding', 'boolean');
  want('splitBackward', 'boolean');
  for (const fn of ['check', 'start', 'choose', 'advance']) want(fn, 'function');
  return problems;
}

function thrown(err: unknown): string {
  const text = err instanceof Error ? `${err.name}: ${err.message}` : `${typeof err} ${String(err)}`;
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}

const refuseChange = (): never => {
  throw new TypeError('the ready view is read-only (copy a list before sorting or changing it)');
};
const READ_ONLY: ProxyHandler<readonly Task[]> = {
  set: refuseChange,
  deleteProperty: refuseChange,
  defineProperty: refuseChange,
};

/** `ready` as a module's policy sees it: the stage's own lists, which it cannot change. */
function readOnlyView(ready: ReadyView): ReadyView {
  return {
    F: new Proxy(ready.F, READ_ONLY),
    B: new Proxy(ready.B, READ_ONLY),
    W: new Proxy(ready.W, READ_ONLY),
    has: (t) => ready.has(t),
  };
}

/**
 * A module's policy whose members each name the module when they throw: `check` passes a
 * ShapeError through (its refusal of the shape) and wraps anything else, and start, choose
 * and advance, which run inside a stage, wrap every error, so the job's failure says which
 * module and which member failed instead of a bare TypeError. The flags and the name are
 * read once; `this` is the module's object, as when it is called directly. `choose` gets
 * the ready view read-only: the lists are the stage's buffers, and a module that sorted
 * one in place would reorder them for every later pick.
 */
function guarded(modulePath: string, p: HintPolicy): HintPolicy {
  const member =
    <A extends unknown[], R>(what: string, fn: (...args: A) => R) =>
    (...args: A): R => {
      try {
        return fn.apply(p, args);
      } catch (err) {
        if (what === 'check' && err instanceof ShapeError) throw err;
        throw new PolicyModuleError(modulePath, `${what} threw ${thrown(err)}`, { cause: err });
      }
    };
  const choose = member('choose', p.choose);
  return {
    name: p.name,
    binding: p.binding,
    splitBackward: p.splitBackward,
    check: member('check', p.check),
    start: member('start', p.start),
    advance: member('advance', p.advance),
    choose: (ready, memo, ctx) => choose(readOnlyView(ready), memo, ctx),
  };
}

function loadModule(name: string): HintPolicy {
  const file = path.resolve(name);
  let mod: Record<string, unknown>;
  try {
    mod = require(file);
  } catch (err) {
    // Node's message goes on with the require stack, line by line: keep its first line.
    throw new PolicyModuleError(name, `cannot load ${file}: ${(err as Error).message.split('\n')[0]}`, { cause: err });
  }
  let candidate: unknown;
  let problems: string[];
  try {
    candidate = mod?.default ?? mod?.policy;
    problems = candidate === undefined ? [] : policyShapeProblems(candidate);
  } catch (err) {
    // A getter of the module's exports threw.
    throw new PolicyModuleError(name, `reading its export threw ${thrown(err)}`, { cause: err });
  }
  if (candidate === undefined) throw new PolicyModuleError(name, `exports neither 'default' nor 'policy'`);
  if (problems.length > 0) throw new PolicyModuleError(name, `export is not a HintPolicy: ${problems.join('; ')}`);
  return guarded(name, candidate as HintPolicy);
}

export function resolvePolicy(name: string): HintPolicy {
  const builtin = BUILTINS.get(name);
  if (builtin) return builtin as HintPolicy;
  if (isModulePath(name)) return loadModule(name);
  throw new UnknownPolicyError(name);
}
