// Plain-text tables for terminal output.

/** `s` with control characters (C0, DEL, C1) written as \uXXXX: what a peer put in a subject
 * or a field, or a file in its text, must not reach the terminal as escape sequences. */
export function printable(s: string): string {
  return s.replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

export function formatTable(header: readonly string[], rows: readonly (readonly string[])[], title?: string): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  const out = [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)];
  return (title ? `${title}\n` : '') + out.join('\n');
}
