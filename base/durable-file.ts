// Writing a file so that a crash, at any moment, leaves either the old file or the whole
// new one: the bytes go to `<path>.tmp`, which is fsynced, then renamed over `path`, and
// the directory is fsynced so the rename itself survives a power loss.

import * as fs from 'fs';
import * as path from 'path';

/** Writes `data` to `file` atomically and durably (temp file, fsync, rename, fsync of the directory). */
export function writeFileDurably(file: string, data: string | Uint8Array): void {
  writeAndSync(`${file}.tmp`, data);
  fs.renameSync(`${file}.tmp`, file);
  syncDirectory(path.dirname(file));
}

/** Writes `data` to `file` (replacing it) and fsyncs it before returning. */
export function writeAndSync(file: string, data: string | Uint8Array): void {
  const fd = fs.openSync(file, 'w', 0o644);
  try {
    const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    for (let off = 0; off < bytes.byteLength;) off += fs.writeSync(fd, bytes, off, bytes.byteLength - off);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/** fsync of a directory: makes the renames and unlinks in it durable. */
export function syncDirectory(dir: string): void {
  const fd = fs.openSync(dir, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}
