// Reading a trace file for `baton trace`: at most MAX_TRACE_FILE_BYTES of a regular file
// or a pipe, parsed as JSON; loadTrace also refuses a file that fails the format check
// (chrome-check.ts), and stageCount says how many stages the trace holds.

import * as fs from 'fs';
import { jsonErrorLine } from '../base/json-error';
import { RegularFileError, readAtMost } from '../base/regular-file';
import { BatonEvent } from '../stage/events';
import { SHAPE_LIMITS } from '../policies/task';
import { UsageError } from './args';
import { ChromeEvent } from './trace/chrome';
import { checkChromeTrace } from './trace/chrome-check';

export class TraceFileError extends Error {
  override name = 'TraceFileError';
}

export interface LoadedTrace {
  traceEvents: ChromeEvent[];
  metadata?: Record<string, unknown>;
}

/** The largest trace file read: about the longest string Node can hold (a file this
 * size parses into several GiB of objects). */
export const MAX_TRACE_FILE_BYTES = 512 * 1024 * 1024 - 64;

/** The file's text, reading at most `max` bytes (a pipe has no size to check first). */
function readCapped(file: string, max: number, over: () => Error): string {
  // Opened blocking, unlike readRegularFile: a pipe here has a writer (<(zcat t.json.gz)).
  const fd = fs.openSync(file, 'r');
  try {
    return readAtMost(fd, max).toString('utf8');
  } catch (e) {
    if (e instanceof RegularFileError) throw e.reason === 'too-big' ? over() : (e.cause ?? e);
    throw e;
  } finally {
    fs.closeSync(fd);
  }
}

export function readJson(file: string): unknown {
  let text: string;
  try {
    // A device could be endless (/dev/zero); a pipe (<(zcat t.json.gz)) is read up to the limit.
    const st = fs.statSync(file);
    if (st.isDirectory()) throw new UsageError(`cannot read ${JSON.stringify(file)}: it is a directory`);
    if (!st.isFile() && !st.isFIFO())
      throw new UsageError(`cannot read ${JSON.stringify(file)}: not a regular file or a pipe`);
    const tooBig = (size: string) =>
      new UsageError(
        `cannot read ${JSON.stringify(file)}: ${size}, over the ${MAX_TRACE_FILE_BYTES} bytes a trace file may have`,
      );
    if (st.size > MAX_TRACE_FILE_BYTES) throw tooBig(`${st.size} bytes`);
    text = readCapped(file, MAX_TRACE_FILE_BYTES, () => tooBig('more bytes'));
  } catch (e) {
    if (e instanceof UsageError) throw e;
    throw new UsageError(
      `cannot read ${JSON.stringify(file)}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
    );
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new TraceFileError(`${file} is not JSON: ${jsonErrorLine(e)}`);
  }
}

/** A trace good enough to rebuild events from: schema-valid, with traceEvents. */
export function loadTrace(file: string): LoadedTrace {
  const json = readJson(file);
  const problems = checkChromeTrace(json);
  if (problems.length > 0)
    throw new TraceFileError(
      `${file} is not a valid trace (${problems.length} problem${problems.length === 1 ? '' : 's'}; see \`baton trace check\`): ${problems[0]}`,
    );
  return Array.isArray(json) ? { traceEvents: json as ChromeEvent[] } : (json as LoadedTrace);
}

/** The stages of a trace: its declared count, or more when its events name more. */
export function stageCount(trace: LoadedTrace, events: readonly BatonEvent[]): number {
  const declared = trace.metadata?.stages;
  let n = typeof declared === 'number' && declared > 0 ? declared : 1;
  for (const e of events) n = Math.max(n, e.stage + 1);
  // Without embedded events, stages are the trace's pids: a trace of something else may have any.
  if (n > SHAPE_LIMITS.stages)
    throw new TraceFileError(
      `the trace names stage ${n - 1}; a Baton trace has at most ${SHAPE_LIMITS.stages} stages (is it a Baton trace?)`,
    );
  return n;
}
