// A small, strict flag parser: every flag is declared once with its type, default and
// help line; unknown flags, missing values and bad numbers are clear errors.
import { InputError } from '../base/errors';

export type FlagType = 'int' | 'number' | 'string' | 'bool' | 'list';

export interface FlagSpec {
  readonly name: string;
  readonly type: FlagType;
  readonly help: string;
  readonly default?: string | number | boolean;
  /** Allowed values for string flags. */
  readonly choices?: readonly string[];
  readonly metavar?: string;
  /** A one-letter alias (`o` for `-o`); the help line says it. */
  readonly short?: string;
}

/** --help, which every command takes. */
export const HELP_FLAG: FlagSpec = { name: 'help', type: 'bool', help: 'show this help' };

/** --print-config, of the commands that resolve a job config (sim, run, train). */
export const PRINT_CONFIG_FLAG: FlagSpec = {
  name: 'print-config',
  type: 'bool',
  help: 'print the resolved flags as a job file (the form --config reads) and exit',
};

/** --config, of the same commands: a job file whose values the flags given override (cli/job-file.ts). */
export const CONFIG_FLAG: FlagSpec = {
  name: 'config',
  type: 'string',
  metavar: 'FILE',
  help: 'read the job from a YAML or JSON job file (the form --print-config prints); flags given override it',
};

export class UsageError extends InputError {
  override name = 'UsageError';
}

/** Whether --help was given; if so, `help` is printed (the command then exits 0). */
export function printedHelp(flags: ParsedFlags, help: string, out: (s: string) => void): boolean {
  if (!flags.help) return false;
  out(help);
  return true;
}

/** The value of `command`'s --`flag`, a time in ms, refused unless from 1 to 60000. */
export function msFlag(value: unknown, command: string, flag: string): number {
  const ms = value as number;
  if (!(ms >= 1 && ms <= 60_000)) throw new UsageError(`${command}: --${flag} must be from 1 to 60000, got ${ms}`);
  return ms;
}

export type ParsedFlags = Record<string, string | number | boolean | string[] | undefined>;

/** A flag name as its key in ParsedFlags and `given` (--snapshot-every: snapshotEvery). */
export const camel = (s: string) => s.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());

/**
 * Parse `argv` against `specs`. `-h` is `--help` where there is one, and a spec's `short`
 * letter stands for its flag. Arguments that are not flags are positional; more than
 * `maxPositional` of them (default none) is an error, so a mistyped flag (`-stages 4`) or
 * a stray value (`--json true`) is not silently dropped.
 */
export function parseFlags(
  argv: readonly string[],
  specs: readonly FlagSpec[],
  command: string,
  maxPositional = 0,
): { flags: ParsedFlags; positional: string[]; given: ReadonlySet<string> } {
  const byName = new Map(specs.map((s) => [s.name, s]));
  const byShort = new Map(specs.filter((s) => s.short).map((s) => [`-${s.short}`, `--${s.name}`]));
  if (byName.has('help')) byShort.set('-h', '--help');
  const flags: ParsedFlags = {};
  const positional: string[] = [];
  /** Flags the user gave (the others hold their defaults), by their camelCase key. */
  const given = new Set<string>();
  for (const s of specs)
    if (s.default !== undefined) flags[camel(s.name)] = s.type === 'list' ? String(s.default).split(',') : s.default;
  for (let i = 0; i < argv.length; i++) {
    const arg = byShort.get(argv[i]) ?? argv[i];
    if (!arg.startsWith('--')) {
      if (positional.length >= maxPositional)
        throw new UsageError(
          `${command}: unexpected argument ${JSON.stringify(arg)} (flags start with --; see \`baton ${command} --help\`)`,
        );
      positional.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    const name = arg.slice(2, eq < 0 ? undefined : eq);
    const spec = byName.get(name);
    if (!spec) throw new UsageError(`${command}: unknown flag --${name} (see \`baton ${command} --help\`)`);
    if (spec.type === 'bool') {
      if (eq >= 0) throw new UsageError(`${command}: --${name} takes no value`);
      flags[camel(name)] = true;
      given.add(camel(name));
      continue;
    }
    const raw = eq >= 0 ? arg.slice(eq + 1) : argv[++i];
    // `--trace --json` is a forgotten value, not a file named --json.
    if (raw === undefined || (eq < 0 && raw.startsWith('--')))
      throw new UsageError(
        `${command}: --${name} needs a value (${spec.metavar ?? spec.type})${raw === undefined ? '' : `, got the flag ${JSON.stringify(raw.slice(0, 40))}; write --${name}=VALUE for a value that starts with --`}`,
      );
    flags[camel(name)] = convertFlag(raw, spec, command);
    given.add(camel(name));
  }
  return { flags, positional, given };
}

const DECIMAL_RE = /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/;

/** A flag's text as its value, checked as on the command line (a job file's values go through it too). */
export function convertFlag(raw: string, spec: FlagSpec, command: string): string | number | string[] {
  switch (spec.type) {
    case 'int': {
      const n = Number(raw);
      if (!/^-?\d+$/.test(raw.trim()) || !Number.isSafeInteger(n))
        throw new UsageError(`${command}: --${spec.name} must be an integer, got ${JSON.stringify(raw)}`);
      return n;
    }
    case 'number': {
      const n = Number(raw);
      // Decimal only: Number() would also take 0x10, 0b1 and 0o7.
      if (!DECIMAL_RE.test(raw.trim()) || !Number.isFinite(n))
        throw new UsageError(`${command}: --${spec.name} must be a decimal number, got ${JSON.stringify(raw)}`);
      return n;
    }
    case 'list': {
      const items = raw
        .split(',')
        .map((x) => x.trim())
        .filter((x) => x.length > 0);
      if (items.length === 0)
        throw new UsageError(`${command}: --${spec.name} needs a comma-separated list, got ${JSON.stringify(raw)}`);
      return items;
    }
    default:
      if (spec.choices && !spec.choices.includes(raw))
        throw new UsageError(
          `${command}: --${spec.name} must be one of ${spec.choices.join(', ')}; got ${JSON.stringify(raw)}`,
        );
      return raw;
  }
}

export function helpText(command: string, summary: string, usage: string, specs: readonly FlagSpec[]): string {
  const rows = specs.map((s) => {
    const left = `--${s.name}${s.type === 'bool' ? '' : ` ${s.metavar ?? s.type.toUpperCase()}`}`;
    const extra = [
      s.choices ? `one of: ${s.choices.join(', ')}` : '',
      s.default !== undefined && s.type !== 'bool' ? `default ${s.default}` : '',
    ]
      .filter(Boolean)
      .join('; ');
    return `  ${left.padEnd(28)} ${s.help}${extra ? ` (${extra})` : ''}`;
  });
  return `baton ${command} — ${summary}\n\nUsage: ${usage}\n\nOptions:\n${rows.join('\n')}\n`;
}
