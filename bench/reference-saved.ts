// A saved `npm run -s bench -- reference --json` result, read back for --from: checked against
// its shape (valibot) so a wrong or damaged file is refused with where it is wrong, before
// anything is drawn from it.

import * as fs from 'fs';
import * as v from 'valibot';
import { UsageError } from '../cli/args';
import { COLUMNS, Column, RELAX_COLUMNS } from './reference-seed';
import type { ReferenceBenchResult } from './offline-reference';

const spread = v.object({ median: v.number(), min: v.number(), max: v.number() });
// JSON has no NaN: a column a run lacked (NaN) comes back as null.
const cell = v.nullable(v.number());

const header = v.looseObject({
  columns: v.array(v.picklist([...COLUMNS, ...RELAX_COLUMNS])),
  seeds: v.pipe(v.number(), v.integer(), v.minValue(1)),
  microbatches: v.pipe(v.number(), v.integer(), v.minValue(1)),
  relax: v.optional(v.string()),
  wall_ms: v.number(),
  jobs: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1))),
  offline_ms_total: v.number(),
});

const where = {
  profile: v.string(),
  stages: v.pipe(v.number(), v.integer(), v.minValue(1)),
  limit: v.union([v.pipe(v.number(), v.integer(), v.minValue(1)), v.literal('depth')]),
};

function body(columns: readonly Column[]) {
  return v.looseObject({
    summary: v.array(
      v.object({
        ...where,
        bound_terms: v.record(v.string(), v.number()),
        ...Object.fromEntries(columns.map((c) => [c, spread])),
      }),
    ),
    runs: v.array(
      v.looseObject({
        ...where,
        seed: v.pipe(v.number(), v.integer(), v.minValue(0)),
        ...Object.fromEntries(columns.map((c) => [c, cell])),
      }),
    ),
  });
}

function check<T extends v.GenericSchema>(schema: T, x: unknown, file: string): v.InferOutput<T> {
  const r = v.safeParse(schema, x);
  if (r.success) return r.output;
  const issue = r.issues[0];
  const at = v.getDotPath(issue);
  throw new UsageError(`--from ${file}: not a reference bench result${at ? ` at ${at}` : ''}: ${issue.message}`);
}

/** The result saved in `file`, or a UsageError saying what is wrong with it. */
export function readSavedReference(file: string): ReferenceBenchResult {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new UsageError(`--from ${file}: ${code === 'ENOENT' ? 'no such file' : (e as Error).message}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new UsageError(
      `--from ${file}: not JSON (${(e as Error).message}); save the bench with npm run -s bench -- reference --json > FILE`,
    );
  }
  const { columns } = check(header, json, file);
  check(body(columns), json, file);
  const r = json as ReferenceBenchResult;
  return { ...r, jobs: r.jobs ?? 1 };
}
