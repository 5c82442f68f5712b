// Writing a Chrome trace (chrome.ts builds it) to a file, an event at a time, as
// JSON.stringify would have written it whole.

import * as fs from 'fs';
import { ChromeTrace } from './chrome';

/** How much JSON text writeChromeTrace gathers before it writes (characters). */
const WRITE_CHUNK_CHARS = 1 << 20;

/**
 * Writes the trace as JSON.stringify would, an event at a time: a long run's trace is more
 * text than one string can hold (V8's limit is about 512 MiB; JSON.stringify of a
 * 524,288-task run threw "Invalid string length" after the run, losing its results).
 */
export function writeChromeTrace(file: string, trace: ChromeTrace): void {
  const { baton_events: embedded, ...meta } = trace.metadata;
  const fd = fs.openSync(file, 'w');
  try {
    let chunk: string[] = [];
    let size = 0;
    const flush = () => {
      fs.writeSync(fd, chunk.join(''));
      chunk = [];
      size = 0;
    };
    const put = (s: string) => {
      chunk.push(s);
      size += s.length;
      if (size >= WRITE_CHUNK_CHARS) flush();
    };
    const list = (items: readonly unknown[]) => items.forEach((x, i) => put(`${i > 0 ? ',' : ''}${JSON.stringify(x)}`));
    put('{"traceEvents":[');
    list(trace.traceEvents);
    // The metadata's own fields, then the embedded events as its last field.
    put(
      `],"displayTimeUnit":${JSON.stringify(trace.displayTimeUnit)},"metadata":${JSON.stringify(meta).slice(0, -1)},"baton_events":[`,
    );
    list(embedded);
    put(']}}');
    flush();
  } finally {
    fs.closeSync(fd);
  }
}
