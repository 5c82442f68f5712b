// How a Gantt chart's marks look, apart from where they go: task colours, the time axis's
// tick step, millisecond labels and text made safe for XML (the report's other SVG charts
// use the last two as well).

import { TaskKind } from '../../policies/task';

/** `s` as XML text: markup escaped, and characters XML 1.0 cannot hold even as a
 * reference (C0 controls other than tab and newlines, U+FFFE, U+FFFF, a lone surrogate)
 * replaced by U+FFFD, so a title from a trace file cannot make the SVG unreadable. */
export function escapeXml(s: string): string {
  return s
    .replace(
      /[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g,
      '\ufffd',
    )
    .replace(
      /[&<>"']/g,
      (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' })[c] as string,
    );
}

/** Tick step of 1, 2 or 5 times a power of ten giving about `target` ticks over `span`. */
export function tickStep(span: number, target = 8): number {
  if (!(span > 0)) return 1;
  const raw = span / target;
  const pow = 10 ** Math.floor(Math.log10(raw));
  const m = raw / pow;
  return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * pow;
}

const HUE: Record<TaskKind, [number, number]> = { F: [212, 62], B: [135, 45], W: [30, 85] };

/** Kind sets the hue; later chunks are lighter. */
export function taskColor(kind: TaskKind, chunk: number, chunks: number): string {
  const [h, s] = HUE[kind];
  return `hsl(${h},${s}%,${lightness(chunk, chunks).toFixed(0)}%)`;
}

export const lightness = (chunk: number, chunks: number) => (chunks <= 1 ? 45 : 36 + (32 * chunk) / (chunks - 1));

/** Milliseconds for a label: whole from 100 up, else 3 significant digits without trailing
 * zeros (of the mantissa only: 2.00e-10 is 2e-10, not 2.00e-1). */
export const fmt = (ms: number) => {
  if (Math.abs(ms) >= 100 || Number.isInteger(ms)) return ms.toFixed(0);
  const [mantissa, exponent] = ms.toPrecision(3).split('e');
  const short = mantissa.includes('.') ? mantissa.replace(/\.?0+$/, '') : mantissa;
  return exponent === undefined ? short : `${short}e${exponent}`;
};
