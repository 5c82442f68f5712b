// JSON.parse's message quotes the text it choked on, newlines and all; errors that report
// a bad JSON file give it on one line.

export function jsonErrorLine(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).replace(/\s*\n\s*/g, ' ');
}
