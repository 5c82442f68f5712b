// A pipeline Gantt chart as standalone SVG: one row per stage (stage 0 on top), a box
// per task coloured by kind and shaded by chunk, idle time left as the row's grey
// background, dashed lines where iterations begin, a time axis in ms, a legend under
// it and a title. It draws tasks only; messages and waits are in the Chrome trace.

import { BatonEvent } from '../../stage/events';
import { TaskKind, formatTask } from '../../policies/task';
import { pairTaskEvents } from '../../checks/task-spans';

export interface GanttOptions {
  stages: number;
  /** First title line (e.g. the policy); the makespan line is added below it. */
  title?: string;
  /** Total width in px (default 1200). */
  width?: number;
  /** ms the time axis spans from the first task (default: to the last task), so charts of several runs share one axis. */
  span?: number;
}

export interface GanttTask {
  stage: number;
  iteration: number;
  kind: TaskKind;
  mb: number;
  chunk: number;
  start: number;
  end: number;
}

export class GanttError extends Error {
  override name = 'GanttError';
}

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

/** Pair task-start with task-end into boxes; a task that starts twice before it ends, or
 * ends without starting, is a GanttError naming it. A task still open at the end of
 * the events (a run cut short) has no box. */
export function ganttTasks(events: readonly BatonEvent[]): GanttTask[] {
  const { spans } = pairTaskEvents(events, {
    restarted: (first, e) => {
      throw new GanttError(
        `stage ${e.stage}, iteration ${e.iteration}: ${formatTask(e)} starts at ${e.t} ms while it is still running (started at ${first.t} ms)`,
      );
    },
    unstarted: (e) => {
      throw new GanttError(
        `stage ${e.stage}, iteration ${e.iteration}: task-end of ${formatTask(e)} at ${e.t} ms without its task-start`,
      );
    },
  });
  return spans.map(({ start, end }) => ({
    stage: end.stage,
    iteration: end.iteration,
    kind: end.kind,
    mb: end.mb,
    chunk: end.chunk,
    start: start.t,
    end: Math.max(start.t, end.t),
  }));
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

const lightness = (chunk: number, chunks: number) => (chunks <= 1 ? 45 : 36 + (32 * chunk) / (chunks - 1));

const LEGEND_ROW_PX = 18;
/** Width of a character of an iteration label (font-size 10), a little over Helvetica's widest digit. */
const ITERATION_CHAR_PX = 6;

/** Milliseconds for a label: whole from 100 up, else 3 significant digits without trailing
 * zeros (of the mantissa only: 2.00e-10 is 2e-10, not 2.00e-1). */
const fmt = (ms: number) => {
  if (Math.abs(ms) >= 100 || Number.isInteger(ms)) return ms.toFixed(0);
  const [mantissa, exponent] = ms.toPrecision(3).split('e');
  const short = mantissa.includes('.') ? mantissa.replace(/\.?0+$/, '') : mantissa;
  return exponent === undefined ? short : `${short}e${exponent}`;
};

/** Where things go on the chart: px for times and stages, and what the tasks span. */
interface ChartLayout {
  width: number;
  stages: number;
  chunks: number;
  t0: number;
  t1: number;
  span: number;
  rowH: number;
  gap: number;
  left: number;
  right: number;
  top: number;
  plotW: number;
  axisY: number;
  x: (t: number) => number;
  iterStart: Map<number, number>;
  iterations: number[];
}

function chartLayout(
  tasks: readonly GanttTask[],
  declaredStages: number,
  width: number,
  axisSpan?: number,
): ChartLayout {
  let stages = declaredStages;
  let chunks = 1;
  let t0 = Infinity;
  let t1 = -Infinity;
  const iterStart = new Map<number, number>();
  for (const t of tasks) {
    stages = Math.max(stages, t.stage + 1);
    chunks = Math.max(chunks, t.chunk + 1);
    t0 = Math.min(t0, t.start);
    t1 = Math.max(t1, t.end);
    iterStart.set(t.iteration, Math.min(iterStart.get(t.iteration) ?? Infinity, t.start));
  }
  if (tasks.length === 0) t0 = t1 = 0;
  const own = tasks.length === 0 ? 1 : Math.max(t1 - t0, 1e-9);
  const span = axisSpan !== undefined && axisSpan >= own ? axisSpan : own;
  const rowH = stages <= 8 ? 30 : stages <= 16 ? 22 : 14;
  const gap = stages <= 16 ? 4 : 2;
  const left = 64;
  const right = 16;
  const top = 64;
  const plotW = width - left - right;
  const x = (t: number) => left + ((t - t0) / span) * plotW;
  const iterations = [...iterStart.keys()].sort((a, b) => a - b);
  const axisY = top + stages * rowH;
  return { width, stages, chunks, t0, t1, span, rowH, gap, left, right, top, plotW, axisY, x, iterStart, iterations };
}

export function ganttSvg(events: readonly BatonEvent[], opts: GanttOptions): string {
  if (!Number.isInteger(opts.stages) || opts.stages < 1)
    throw new GanttError(`ganttSvg: stages must be a positive integer, got ${JSON.stringify(opts.stages)}`);
  const width = opts.width ?? 1200;
  if (!(width >= 300))
    throw new GanttError(`ganttSvg: width must be at least 300 px, got ${JSON.stringify(opts.width)}`);
  const tasks = ganttTasks(events);
  const c = chartLayout(tasks, opts.stages, width, opts.span);
  const { legend, height } = legendLayout(tasks, c);
  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" font-family="Helvetica, Arial, sans-serif">`,
  );
  parts.push(`<rect x="0" y="0" width="${width}" height="${height}" fill="#ffffff"/>`);
  parts.push(...titleSvg(tasks, c, opts.title ?? 'pipeline'));
  parts.push(...rowsSvg(c));
  parts.push(...axisSvg(c));
  parts.push(...taskBoxesSvg(tasks, c));
  if (c.iterations.length > 1 || events.some((e) => e.type === 'iteration-start')) parts.push(...iterationMarksSvg(c));
  for (const { color, text, x: ex, y } of legend) {
    parts.push(
      `<rect class="legend" x="${ex.toFixed(1)}" y="${y}" width="12" height="12" fill="${color}" stroke="#90a4ae" stroke-width="0.5"/>`,
    );
    parts.push(`<text x="${(ex + 16).toFixed(1)}" y="${y + 10}" font-size="11">${escapeXml(text)}</text>`);
  }
  parts.push('</svg>');
  return parts.join('\n');
}

/** Legend entries under the axis title, in as many rows as the width needs (a row of 3
 * kinds × V chunks ran off the chart's left edge at V = 8), and the chart's height. */
function legendLayout(
  tasks: readonly GanttTask[],
  { chunks, left, right, width, axisY }: ChartLayout,
): { legend: { color: string; text: string; x: number; y: number }[]; height: number } {
  const kinds = (['F', 'B', 'W'] as TaskKind[]).filter((k) => tasks.some((t) => t.kind === k));
  const placed: { color: string; text: string; x: number; row: number }[] = [];
  const entries: [string, string][] = [];
  for (const k of kinds)
    for (let c = 0; c < chunks; c++) entries.push([taskColor(k, c, chunks), chunks > 1 ? `${k} chunk ${c}` : k]);
  entries.push(['#eceff1', 'idle']);
  let lx = left;
  let row = 0;
  for (const [color, text] of entries) {
    const w = text.length * 7 + 28;
    if (lx > left && lx + w > width - right) {
      lx = left;
      row++;
    }
    placed.push({ color, text, x: lx, row });
    lx += w;
  }
  const legendY = axisY + 50;
  return {
    legend: placed.map(({ color, text, x, row: r }) => ({ color, text, x, y: legendY + r * LEGEND_ROW_PX })),
    height: legendY + (row + 1) * LEGEND_ROW_PX + 8,
  };
}

/** The title and, under it, the shape, the task count and the time from the first task to the last. */
function titleSvg(tasks: readonly GanttTask[], c: ChartLayout, title: string): string[] {
  const { iterations, iterStart, stages, chunks, t0, t1, left } = c;
  const iterEnd = new Map<number, number>();
  for (const t of tasks) iterEnd.set(t.iteration, Math.max(iterEnd.get(t.iteration) ?? -Infinity, t.end));
  const makespans = iterations.map((it) => (iterEnd.get(it) as number) - (iterStart.get(it) as number));
  const mean = makespans.reduce((a, b) => a + b, 0) / Math.max(1, makespans.length);
  const sub =
    `P=${stages}${chunks > 1 ? ` V=${chunks}` : ''} · ${tasks.length} tasks · ` +
    (iterations.length > 1
      ? `first task to last: ${fmt(mean)} ms per iteration over ${iterations.length} iterations (${fmt(t1 - t0)} ms in all)`
      : `first task to last: ${fmt(t1 - t0)} ms`);
  return [
    `<text x="${left}" y="22" font-size="16" font-weight="bold">${escapeXml(title)}</text>`,
    `<text x="${left}" y="42" font-size="12" fill="#444">${escapeXml(sub)}</text>`,
  ];
}

/** One row per stage; its grey background is idle time. */
function rowsSvg({ stages, top, rowH, gap, left, plotW }: ChartLayout): string[] {
  const parts: string[] = [];
  for (let s = 0; s < stages; s++) {
    const y = top + s * rowH;
    parts.push(
      `<rect class="row" x="${left}" y="${y + gap / 2}" width="${plotW}" height="${rowH - gap}" fill="#eceff1"/>`,
    );
    if (s % Math.ceil(stages / 16) === 0)
      parts.push(
        `<text x="${left - 6}" y="${y + rowH / 2 + 4}" font-size="${Math.min(12, rowH - 2)}" text-anchor="end">stage ${s}</text>`,
      );
  }
  return parts;
}

/** The time axis with ticks and grid lines. */
function axisSvg({ span, t0, top, axisY, left, plotW, x }: ChartLayout): string[] {
  const step = tickStep(span);
  if (!(Number.isFinite(step) && step > 0 && span / step < 1000))
    throw new GanttError(`ganttSvg: cannot put a time axis on a span of ${span} ms`);
  const parts: string[] = [];
  parts.push(`<line x1="${left}" y1="${axisY}" x2="${left + plotW}" y2="${axisY}" stroke="#333"/>`);
  for (let v = 0; v <= span + step * 1e-6; v += step) {
    const tx = x(t0 + v).toFixed(2);
    parts.push(`<line x1="${tx}" y1="${top}" x2="${tx}" y2="${axisY}" stroke="#cfd8dc" stroke-width="0.5"/>`);
    parts.push(`<line x1="${tx}" y1="${axisY}" x2="${tx}" y2="${axisY + 5}" stroke="#333"/>`);
    parts.push(`<text x="${tx}" y="${axisY + 18}" font-size="11" text-anchor="middle">${fmt(v)}</text>`);
  }
  parts.push(`<text x="${left + plotW / 2}" y="${axisY + 36}" font-size="12" text-anchor="middle">time (ms)</text>`);
  return parts;
}

/** A box per task with a tooltip, labelled with its microbatch where the label fits. */
function taskBoxesSvg(tasks: readonly GanttTask[], { x, top, rowH, gap, t0, chunks }: ChartLayout): string[] {
  const fontSize = Math.min(12, rowH - 8);
  const parts: string[] = [];
  for (const t of tasks) {
    const x0 = x(t.start);
    const w = Math.max(x(t.end) - x0, 0.5);
    const y = top + t.stage * rowH + gap / 2;
    const h = rowH - gap;
    const tip = `stage ${t.stage}, iteration ${t.iteration}: ${formatTask(t)} ${fmt(t.start - t0)}–${fmt(t.end - t0)} ms`;
    parts.push(
      `<rect class="task" x="${x0.toFixed(2)}" y="${y}" width="${w.toFixed(2)}" height="${h}" fill="${taskColor(t.kind, t.chunk, chunks)}" stroke="#ffffff" stroke-width="${w > 3 ? 0.6 : 0}"><title>${escapeXml(tip)}</title></rect>`,
    );
    const label = escapeXml(String(t.mb));
    if (fontSize >= 7 && w >= label.length * fontSize * 0.62 + 3)
      parts.push(
        `<text x="${(x0 + w / 2).toFixed(2)}" y="${y + h / 2 + fontSize * 0.36}" font-size="${fontSize}" text-anchor="middle" fill="${lightness(t.chunk, chunks) > 55 ? '#1a1a1a' : '#ffffff'}">${label}</text>`,
      );
  }
  return parts;
}

/** Iteration boundaries: where each iteration's first task starts. Labels say "iteration
 * k" where every one fits before the next line, else just k; one that would cover the
 * label before it is left out, and the last stays inside the chart. */
function iterationMarksSvg({ iterations, iterStart, x, top, axisY, width, right }: ChartLayout): string[] {
  const parts: string[] = [];
  const xs = iterations.map((it) => x(iterStart.get(it) as number));
  const labelW = (text: string) => text.length * ITERATION_CHAR_PX;
  const long = xs.every((ix, i) => i === xs.length - 1 || labelW(`iteration ${iterations[i]}`) + 4 <= xs[i + 1] - ix);
  let free = -Infinity;
  iterations.forEach((it, i) => {
    const ix = xs[i].toFixed(2);
    parts.push(
      `<line class="iteration" x1="${ix}" y1="${top - 6}" x2="${ix}" y2="${axisY}" stroke="#b71c1c" stroke-width="1.2" stroke-dasharray="5,3"/>`,
    );
    const text = long ? `iteration ${it}` : String(it);
    const lx = Math.max(0, Math.min(xs[i], width - right - labelW(text)));
    if (lx < free) return;
    free = lx + labelW(text) + 4;
    parts.push(
      `<text x="${lx.toFixed(2)}" y="${top - 9}" font-size="10" fill="#b71c1c" text-anchor="start">${text}</text>`,
    );
  });
  return parts;
}
