// Key files: the secret a hand-started node agent and its launchers share (`baton node
// --key-file`, `baton run --node-key-file`), written by `baton auth key`. A key file holds
// one key (auth-seal.ts keyText: 43 base64url characters) and must be readable by its owner
// only, as ssh requires of a private key: anyone who reads it can act as a launcher.

import { chmodSync, openSync, closeSync, writeSync } from 'fs';
import { keyText, newJobKey, parseKey } from '../transport/auth-seal';
import { readPrivateFile } from '../transport/nats-access';
import { UsageError } from './args';

/** The key in `file`, refused as a usage error (named by `flag`) when unreadable, malformed or open to others. */
export function readKeyFile(file: string, flag: string): Uint8Array {
  const text = readPrivateFile(file, flag, (m) => new UsageError(m), ': the key file is readable by others');
  const key = parseKey(text);
  if (key === null)
    throw new UsageError(
      `${flag} ${JSON.stringify(file)}: not a Baton key (43 base64url characters; baton auth key FILE writes one)`,
    );
  return key;
}

/** Write a fresh key to `file` (created, mode 600; an existing file is not overwritten). */
export function writeKeyFile(file: string): void {
  let fd: number;
  try {
    fd = openSync(file, 'wx', 0o600);
  } catch (err) {
    throw new UsageError(`cannot create key file ${JSON.stringify(file)}: ${(err as Error).message}`);
  }
  try {
    writeSync(fd, `${keyText(newJobKey())}\n`);
  } finally {
    closeSync(fd);
  }
  chmodSync(file, 0o600);
}
