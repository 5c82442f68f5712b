// Reading a file a user or a checkpoint names, which must be an ordinary file: a pipe
// with no writer, a device such as /dev/zero or a directory would hang, never end or
// fail obscurely, and several processes may need to read the same path.

import * as fs from 'fs';

export class RegularFileError extends Error {
  override name = 'RegularFileError';
  constructor(
    message: string,
    readonly reason: 'missing' | 'not-regular' | 'too-big' | 'unreadable',
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

function kindOf(st: fs.Stats): string {
  if (st.isDirectory()) return 'a directory';
  if (st.isFIFO()) return 'a pipe';
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'a device';
  if (st.isSocket()) return 'a socket';
  return 'not a regular file';
}

/** Reads to the end, refusing more than `maxBytes`: a file's size may say 0 and still hold more (/proc). */
export function readAtMost(fd: number, maxBytes: number): Buffer {
  const chunks: Buffer[] = [];
  let total = 0;
  for (;;) {
    const chunk = Buffer.allocUnsafe(Math.min(1 << 20, maxBytes + 1 - total));
    let n: number;
    try {
      n = fs.readSync(fd, chunk, 0, chunk.length, null);
    } catch (err) {
      throw new RegularFileError(`cannot be read: ${(err as Error).message}`, 'unreadable', { cause: err });
    }
    if (n === 0) return Buffer.concat(chunks, total);
    chunks.push(chunk.subarray(0, n));
    total += n;
    if (total > maxBytes) throw new RegularFileError(`holds more than the limit of ${maxBytes} bytes`, 'too-big');
  }
}

/** The bytes of `file`, a regular file of at most `maxBytes`; messages start with "is ...", "does not exist", ... */
export function readRegularFile(file: string, maxBytes: number): Buffer {
  let fd: number;
  try {
    // O_NONBLOCK: opening a FIFO with no writer must not hang; it is refused below.
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === 'ENOENT') throw new RegularFileError('does not exist', 'missing', { cause: err });
    throw new RegularFileError(`cannot be read: ${(err as Error).message}`, 'unreadable', { cause: err });
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) throw new RegularFileError(`is ${kindOf(st)}, not a regular file`, 'not-regular');
    if (st.size > maxBytes)
      throw new RegularFileError(`has ${st.size} bytes, over the limit of ${maxBytes}`, 'too-big');
    return readAtMost(fd, maxBytes);
  } finally {
    fs.closeSync(fd);
  }
}
