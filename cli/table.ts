// Plain-text tables for terminal output.

export function formatTable(header: readonly string[], rows: readonly (readonly string[])[], title?: string): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  const out = [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)];
  return (title ? `${title}\n` : '') + out.join('\n');
}
