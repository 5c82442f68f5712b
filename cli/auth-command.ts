// `baton auth`: the credentials Baton's processes use. `baton auth key FILE` writes a fresh
// key file for hand-started node agents and their launchers (key-file.ts).

import { HELP_FLAG, FlagSpec, UsageError, helpText, parseFlags } from './args';
import { writeKeyFile } from './key-file';

const AUTH_FLAGS: readonly FlagSpec[] = [HELP_FLAG];

export const AUTH_HELP = helpText(
  'auth',
  'write credentials: a key file that node agents started by hand and their launchers share',
  'baton auth key FILE',
  AUTH_FLAGS,
);

export async function authCommand(argv: readonly string[], out: (s: string) => void): Promise<number> {
  const { flags, positional } = parseFlags(argv, AUTH_FLAGS, 'auth', 2);
  if (flags.help) {
    out(AUTH_HELP);
    return 0;
  }
  const [sub, file] = positional;
  if (sub !== 'key' || file === undefined) throw new UsageError('auth: usage: baton auth key FILE');
  writeKeyFile(file);
  out(`wrote a new key to ${file} (mode 600): give it to baton node --key-file and baton run --node-key-file`);
  return 0;
}
