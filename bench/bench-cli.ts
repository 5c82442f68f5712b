// The command line of every benchmark: declared flags (cli/args.ts, so unknown flags and
// bad numbers are refused), --help, --json, and one-line errors (exit 2 for bad flags,
// 1 when the benchmark fails).

import { FlagSpec, ParsedFlags, UsageError, helpText, parseFlags } from '../cli/args';

const COMMON: readonly FlagSpec[] = [
  // npm prints its own lines (the script it runs, the build's) on stdout before the benchmark's.
  {
    name: 'json',
    type: 'bool',
    help: "print one JSON object (npm run -s bench -- … keeps npm's own lines off stdout)",
  },
  { name: 'help', type: 'bool', help: 'show this help' },
];

export function benchMain(
  name: string,
  what: string,
  specs: readonly FlagSpec[],
  run: (flags: ParsedFlags) => Promise<string | object>,
): void {
  const all = [...specs, ...COMMON];
  const usage = [
    'npm run bench --',
    name,
    ...specs.map((s) => `[--${s.name}${s.type === 'bool' ? '' : ` ${s.metavar ?? s.type.toUpperCase()}`}]`),
    '[--json]',
  ].join(' ');
  // The flag parser and help speak of `baton <command>`; a benchmark is run through npm.
  const npm = (s: string) => s.replace(/baton bench /g, 'npm run bench -- ');
  let flags: ParsedFlags;
  try {
    flags = parseFlags(process.argv.slice(2), all, `bench ${name}`).flags;
  } catch (err) {
    process.stderr.write(`${npm((err as Error).message)}\n`);
    process.exitCode = 2;
    return;
  }
  if (flags.help) {
    console.log(npm(helpText(`bench ${name}`, what, usage, all)));
    return;
  }
  run(flags).then(
    (r) => console.log(flags.json ? JSON.stringify(r) : r),
    (err: Error) => {
      process.stderr.write(
        `bench ${name}: ${err instanceof UsageError ? '' : `${err.name}: `}${err.message.replace(/\s*\n\s*/g, ' ')}\n`,
      );
      process.exitCode = err instanceof UsageError ? 2 : 1;
    },
  );
}

/** A positive integer flag, when given. */
export function positiveInt(flags: ParsedFlags, name: string): number | undefined {
  const v = flags[name.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase())];
  if (v === undefined) return undefined;
  if (!(Number.isSafeInteger(v) && (v as number) >= 1))
    throw new UsageError(`--${name} must be a positive integer, got ${String(v)}`);
  return v as number;
}
