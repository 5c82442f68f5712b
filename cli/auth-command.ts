// `baton auth`: the credentials Baton's processes use. `baton auth key FILE` writes a fresh
// key file for hand-started node agents and their launchers (key-file.ts); `baton auth init
// DIR …` a shared nats-server's accounts for one job and a credentials file per process
// (auth-init.ts).

import { HELP_FLAG, FlagSpec, UsageError, helpText, parseFlags, printedHelp } from './args';
import { writeKeyFile } from './key-file';
import { AUTH_INIT_USAGE, authInit } from './auth-init';

const AUTH_FLAGS: readonly FlagSpec[] = [HELP_FLAG];

export const AUTH_HELP = helpText(
  'auth',
  "write credentials: a key file that node agents started by hand and their launchers share, or a shared nats-server's accounts for one job and a credentials file per process (baton auth init --help)",
  `baton auth key FILE | ${AUTH_INIT_USAGE}`,
  AUTH_FLAGS,
);

export async function authCommand(argv: readonly string[], out: (s: string) => void): Promise<number> {
  if (argv[0] === 'init') {
    out(authInit(argv.slice(1)));
    return 0;
  }
  const { flags, positional } = parseFlags(argv, AUTH_FLAGS, 'auth', 2);
  if (printedHelp(flags, AUTH_HELP, out)) return 0;
  const [sub, file] = positional;
  if (sub !== 'key' || file === undefined)
    throw new UsageError(`auth: usage: baton auth key FILE, or ${AUTH_INIT_USAGE}`);
  writeKeyFile(file);
  out(`wrote a new key to ${file} (mode 600): give it to baton node --key-file and baton run --node-key-file`);
  return 0;
}
