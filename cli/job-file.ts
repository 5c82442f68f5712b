// `--config FILE` and `--print-config` of sim, run and train: a job file (YAML or JSON,
// cli/job-file-schema.ts) read and checked, its values taken for every flag not given on the
// command line (flags override it), and the flags a command ends with printed as a job file.
// The printed form fed back with --config runs the same job: the same flags, the same values.

import * as path from 'path';
import * as v from 'valibot';
import { InputError } from '../base/errors';
import { quoteValue } from '../base/quote';
import { readRegularFile } from '../base/regular-file';
import { jsonErrorLine } from '../base/json-error';
import { redactNatsUrl } from '../transport/nats-url';
import { FlagSpec, ParsedFlags, UsageError, convertFlag } from './args';
import { isPlainObject } from '../base/quote';
import { JOB_FILE_SCHEMA, JobCommand, JobFileKey, keysOf } from './job-file-schema';

/** A job file is a few hundred bytes; a megabyte is no job file. */
export const MAX_JOB_FILE_BYTES = 1 << 20;

export class JobFileError extends InputError {
  override name = 'JobFileError';
}

const camel = (s: string) => s.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());

/** The keys of `command` whose flag it has, by path. */
function commandKeys(command: JobCommand, specs: readonly FlagSpec[]) {
  const byName = new Map(specs.map((s) => [s.name, s]));
  return keysOf(command)
    .filter((k) => k.flag !== '' && byName.has(k.flag))
    .map((k) => ({ ...k, spec: byName.get(k.flag)! }));
}

/** The file's text as a value: JSON for a .json file, YAML (of which JSON is a part) otherwise. */
function parseText(file: string, text: string): unknown {
  if (path.extname(file).toLowerCase() === '.json') {
    try {
      return JSON.parse(text);
    } catch (err) {
      throw new JobFileError(`job file ${file}: not JSON: ${jsonErrorLine(err)}`);
    }
  }
  // Loaded only here: commands without --config never pay for the YAML parser.
  const YAML = require('yaml') as typeof import('yaml');
  const doc = YAML.parseDocument(text, { uniqueKeys: true });
  if (doc.errors.length > 0)
    throw new JobFileError(`job file ${file}: not YAML: ${doc.errors[0].message.replace(/\s*\n[\s\S]*/, '')}`);
  return doc.toJS({ maxAliasCount: 100 }) ?? {};
}

/** The keys of `command` under `parent` (a section, or [] for the top level), for a message. */
function allowedKeys(parent: readonly string[], keys: readonly { path: string[] }[]): string[] {
  const under = keys.filter((k) => parent.every((p, i) => k.path[i] === p) && k.path.length > parent.length);
  return [...new Set(under.map((k) => k.path[parent.length]))];
}

/** The first of the schema's complaints, as `path must be …, got …` or `path is not a key (…)`. */
function schemaProblem(issue: v.BaseIssue<unknown>, keys: readonly { path: string[] }[]): string {
  const at = (issue.path ?? []).map((p) => String(p.key));
  const where = at.join('.');
  if (issue.type === 'strict_object' && issue.expected === 'never') {
    const parent = at.slice(0, -1);
    const takes = allowedKeys(parent, keys).join(', ');
    return `${where} is not a key (${parent.length > 0 ? parent.join('.') : 'the top level'} takes ${takes})`;
  }
  return `${where} must be ${issue.message}, got ${quoteValue(issue.input, 60)}`;
}

/** Reads and checks a job file; returns its values by flag (camelCase) as the flags hold them. */
export function readJobFile(file: string, command: JobCommand, specs: readonly FlagSpec[]): ParsedFlags {
  let text: string;
  try {
    text = readRegularFile(file, MAX_JOB_FILE_BYTES).toString('utf8');
  } catch (err) {
    throw new JobFileError(`job file ${file} ${(err as Error).message}`);
  }
  const value = parseText(file, text);
  if (!isPlainObject(value))
    throw new JobFileError(
      `job file ${file}: must be a map of keys (job, shape, policy, …), got ${quoteValue(value, 60)}`,
    );
  const keys = commandKeys(command, specs);
  const checked = v.safeParse(JOB_FILE_SCHEMA, value, { abortEarly: true });
  if (!checked.success) throw new JobFileError(`job file ${file}: ${schemaProblem(checked.issues[0], keys)}`);
  const mine = new Set(keys.map((k) => k.path.join('.')));
  const out: ParsedFlags = {};
  for (const k of keysOf(command)) {
    const where = k.path.join('.');
    const raw = k.path.reduce<unknown>((x, p) => (x as Record<string, unknown> | undefined)?.[p], checked.output);
    if (raw === undefined) continue;
    if (!mine.has(where))
      throw new JobFileError(
        `job file ${file}: ${where} is not a key of baton ${command} (it has no --${k.key.flagOf ? Object.values(k.key.flagOf)[0] : k.flag})`,
      );
    const spec = specs.find((s) => s.name === k.flag)!;
    out[camel(k.flag)] = flagValue(k.key, spec, raw, `job file ${file}: ${where}`);
  }
  return out;
}

/** A checked file value as parseFlags would have made it from the flag's text (so the flag's own checks apply). */
function flagValue(k: JobFileKey, spec: FlagSpec, raw: unknown, where: string): ParsedFlags[string] {
  if (spec.type === 'bool') return raw === true ? true : undefined;
  const text = k.toFlag
    ? (k.toFlag as (x: unknown) => string | string[])(raw)
    : Array.isArray(raw)
      ? raw.map(String)
      : String(raw);
  if (Array.isArray(text)) return text;
  try {
    return convertFlag(text, spec, 'job file');
  } catch (err) {
    throw new JobFileError(`${where}: ${(err as Error).message.replace(/^job file: /, '')}`);
  }
}

/**
 * parseFlags' result with a job file's values for the flags not given (when --config names
 * one); `given` still holds only the flags of the command line.
 */
export function withJobFile<T extends { flags: ParsedFlags; given: ReadonlySet<string> }>(
  parsed: T,
  command: JobCommand,
  specs: readonly FlagSpec[],
): T {
  const file = parsed.flags.config;
  if (file === undefined) return parsed;
  if (typeof file !== 'string') throw new UsageError(`${command}: --config needs a file`);
  const fromFile = readJobFile(file, command, specs);
  const flags: ParsedFlags = { ...parsed.flags };
  for (const [k, x] of Object.entries(fromFile)) if (!parsed.given.has(k)) flags[k] = x;
  return { ...parsed, flags };
}

/** The flags a command ends with, as a job file (JSON, which YAML reads too): what --print-config prints. */
export function jobFileText(flags: ParsedFlags, command: JobCommand, specs: readonly FlagSpec[]): string {
  const out: Record<string, unknown> = {};
  for (const k of commandKeys(command, specs)) {
    const x = flags[camel(k.flag)];
    if (x === undefined && k.spec.type !== 'bool') continue;
    let file: unknown = k.spec.type === 'bool' ? x === true : k.key.toFile ? k.key.toFile(x as string | string[]) : x;
    if (k.flag === 'nats') file = redactNatsUrl(String(x));
    let at = out;
    for (const p of k.path.slice(0, -1)) at = (at[p] ??= {}) as Record<string, unknown>;
    at[k.path[k.path.length - 1]] = file;
  }
  return JSON.stringify(out, null, 2);
}
