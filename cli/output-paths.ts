// Where a command will write is checked before it runs, so a long run does not end in a
// write error: a file path must not be a directory and must be creatable where it is; a
// directory path must be a directory, or is created now.

import * as fs from 'fs';
import * as path from 'path';
import { UsageError } from './args';

function writable(dir: string): boolean {
  try {
    fs.accessSync(dir, fs.constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

/** Whether a file can really be made in `dir` (root passes access() where an immutable directory refuses). */
function canCreateIn(dir: string): boolean {
  const probe = path.join(dir, `.baton-probe-${process.pid}`);
  try {
    fs.closeSync(fs.openSync(probe, 'wx'));
    fs.unlinkSync(probe);
    return true;
  } catch {
    return false;
  }
}

/** Where a symbolic link whose target does not exist leads (following chains), or a UsageError for a loop. */
function danglingTarget(link: string, given: string, flag: string): string {
  const end = linkEnd(link);
  if (end === null) throw new UsageError(`${flag} ${given}: a loop of symbolic links`);
  return end;
}

/** Where a chain of symbolic links from `p` ends (a path that is no link, existing or not), or null for a loop. */
function linkEnd(p: string): string | null {
  for (let hops = 0; hops < 40; hops++) {
    if (!isLink(p)) return p;
    p = path.resolve(path.dirname(p), fs.readlinkSync(p));
  }
  return null;
}

/**
 * One key per file a path would write: links followed (a link whose target does not exist
 * yet too) and the directory's real path, so two spellings of one file compare equal.
 */
export function writtenFileKey(file: string): string {
  const p = linkEnd(path.resolve(file)) ?? path.resolve(file);
  try {
    return path.join(fs.realpathSync(path.dirname(p)), path.basename(p));
  } catch {
    return p;
  }
}

function isLink(p: string): boolean {
  try {
    return fs.lstatSync(p).isSymbolicLink();
  } catch {
    return false;
  }
}

/** The closest existing path at or above `p` (which may not exist yet). */
function existingAncestor(p: string): string {
  let d = path.resolve(p);
  while (!fs.existsSync(d)) d = path.dirname(d);
  return d;
}

export function checkOutputFile(file: string, flag: string): void {
  const abs = path.resolve(file);
  if (fs.existsSync(abs)) {
    if (fs.statSync(abs).isDirectory()) throw new UsageError(`${flag} ${file}: is a directory; give a file path`);
    if (!writable(abs)) throw new UsageError(`${flag} ${file}: not writable`);
    return;
  }
  const dir = path.dirname(abs);
  if (!fs.existsSync(dir) || !fs.statSync(dir).isDirectory())
    throw new UsageError(`${flag} ${file}: directory ${dir} does not exist`);
  if (!writable(dir)) throw new UsageError(`${flag} ${file}: cannot create files in ${dir}`);
  // A link whose target does not exist yet is written through: check where it leads.
  if (isLink(abs)) return checkOutputFile(danglingTarget(abs, file, flag), flag);
  // Permission bits do not tell everything (root cannot create files in /proc): try it.
  try {
    fs.closeSync(fs.openSync(abs, 'wx'));
    fs.unlinkSync(abs);
  } catch (err) {
    throw new UsageError(
      `${flag} ${file}: cannot be created: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
}

/** Checks (or creates) an output directory; returns the directories it made, outermost first. */
export function checkOutputDir(dir: string, flag: string): string[] {
  const abs = path.resolve(dir);
  if (fs.existsSync(abs)) {
    if (!fs.statSync(abs).isDirectory()) throw new UsageError(`${flag} ${dir}: exists and is not a directory`);
    if (!writable(abs) || !canCreateIn(abs)) throw new UsageError(`${flag} ${dir}: not writable`);
    return [];
  }
  // A link to a directory that does not exist yet: the directory is made where it leads.
  if (isLink(abs)) return checkOutputDir(danglingTarget(abs, dir, flag), flag);
  const up = existingAncestor(abs);
  if (!fs.statSync(up).isDirectory() || !writable(up))
    throw new UsageError(`${flag} ${dir}: cannot be created (${up} is not a writable directory)`);
  // Permission bits do not tell everything (root may not create directories in /sys): try
  // it, one level at a time. Node's recursive mkdir never returns when the kernel answers
  // ENOENT under a parent that exists (a path in /proc).
  const missing: string[] = [];
  for (let d = abs; d !== up; d = path.dirname(d)) missing.unshift(d);
  const made: string[] = [];
  try {
    for (const d of missing) {
      fs.mkdirSync(d);
      made.push(d);
    }
  } catch (err) {
    for (const d of made.reverse()) {
      try {
        fs.rmdirSync(d);
      } catch {
        /* leave it: the error below is the one to report */
      }
    }
    throw new UsageError(
      `${flag} ${dir}: cannot be created: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
  return made;
}

/** Removes, innermost first, the directories checkOutputDir made that are still empty. */
export function removeMadeDirs(made: readonly string[]): void {
  for (const d of [...made].reverse()) {
    try {
      if (fs.readdirSync(d).length > 0) return;
      fs.rmdirSync(d);
    } catch {
      return; // leave it: the command's own error is the one to report
    }
  }
}
