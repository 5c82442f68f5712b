import { mkdtempSync } from 'fs';
import * as os from 'os';
import * as path from 'path';
import { writeKeyFile, readKeyFile } from '../cli/key-file';

/** A fresh key file (mode 600) in a temporary directory, and its key. */
export function testKeyFile(): { file: string; key: Uint8Array } {
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'baton-key-')), 'node.key');
  writeKeyFile(file);
  return { file, key: readKeyFile(file, 'test') };
}
