// The report as one self-contained HTML file: inline CSS, a few lines of inline script
// (sortable tables) and inline SVG; its Content-Security-Policy forbids every fetch, so
// opening it never reaches the network.

import { escapeXml, ganttSvg, ganttTasks } from '../trace/gantt';
import { TABLE_TERMS } from '../compare-entry';
import { lossCurveSvg } from './loss-svg';
import { ReportData, ReportLoss, ReportRun, Row } from './report-data';
import { latencyHistogram, stageUse } from './report-stats';
import { histogramSvg, utilizationSvg } from './report-svg';

const esc = (v: unknown) => escapeXml(String(v));
const num = (d: number) => (v: unknown) => (typeof v === 'number' ? v.toFixed(d) : '');
const list = (v: unknown) => (Array.isArray(v) ? v.join(',') : '');

/** The table's columns, in order, where any row has the field; peak in-flight stands beside the speedup. */
const COLUMNS: readonly [key: string, head: string, cell: (v: unknown, r: Row) => string][] = [
  ['policy', 'policy', String],
  ['buffer_limit', 'buffer limit', (v, r) => (r.binding === true ? 'schedule' : String(v))],
  ['makespan_ms', 'makespan ms', num(2)],
  ['speedup', 'speedup', (v) => (typeof v === 'number' ? `${v.toFixed(3)}x` : '')],
  ['peak_inflight', 'peak in-flight', list],
  ['inflight_caps', 'cap', list],
  ['lower_bound_ms', 'lower bound ms', num(2)],
  ['efficiency', 'efficiency', num(3)],
  ['bubble_fraction', 'bubble', num(3)],
  ['messages', 'messages', String],
  ['processes', 'processes', String],
  ['final_loss', 'final loss', num(4)],
  ['val_loss', 'validation loss', num(4)],
  ['tokens_per_s', 'tokens/s', num(0)],
  ['consistency', 'consistency', String],
  ['param_checksum', 'param checksum', (v) => String(v).slice(0, 16)],
];

/** Rows with a speedup over the first when several have none of their own. */
function withSpeedups(rows: readonly Row[]): Row[] {
  const base = rows[0]?.makespan_ms;
  if (rows.length < 2 || rows.some((r) => 'speedup' in r) || typeof base !== 'number') return [...rows];
  return rows.map((r) => ({ ...r, speedup: r.makespan_ms === base ? 1 : base / (r.makespan_ms as number) }));
}

function table(head: readonly string[], body: readonly string[][], cls = 'data'): string {
  const th = head.map((h) => `<th>${esc(h)}</th>`).join('');
  const tr = body.map((r) => `<tr>${r.map((c) => `<td>${esc(c)}</td>`).join('')}</tr>`).join('\n');
  return `<table class="${cls}"><thead><tr>${th}</tr></thead><tbody>\n${tr}\n</tbody></table>`;
}

function runTable(rows: readonly Row[]): string {
  const all = withSpeedups(rows);
  const cols = COLUMNS.filter(([key]) => all.some((r) => r[key] !== undefined && r[key] !== null));
  const shape = rows[0]
    ? `P=${esc(rows[0].stages)} M=${esc(rows[0].microbatches)} V=${esc(rows[0].chunks)} profile=${esc(rows[0].profile)} jitter=${esc(rows[0].jitter)} seed=${esc(rows[0].seed)} clock=${esc(rows[0].clock)} warm-up iterations=${esc(rows[0].warmup_iterations ?? 0)}`
    : '';
  return (
    `<section id="table"><h2>Run</h2><p class="shape">${shape}</p>` +
    table(
      cols.map(([, h]) => (h === 'speedup' && rows.length > 1 ? `speedup vs ${String(rows[0].policy)}` : h)),
      all.map((r) => cols.map(([key, , cell]) => (r[key] === undefined || r[key] === null ? '' : cell(r[key], r)))),
    ) +
    `<p class="terms">${esc(TABLE_TERMS).replace(/\n/g, '<br>')}</p></section>`
  );
}

/** Every run's Gantt chart on one time axis: the longest run's span, each from its first task. */
function ganttSection(runs: readonly ReportRun[]): string {
  if (runs.length === 0)
    return '<section id="gantt"><h2>Gantt</h2><p>No events: give the run\'s trace files.</p></section>';
  const spanOf = (r: ReportRun) => {
    const ts = ganttTasks(r.events);
    return ts.length === 0 ? 0 : Math.max(...ts.map((t) => t.end)) - Math.min(...ts.map((t) => t.start));
  };
  const span = Math.max(...runs.map(spanOf));
  const charts = runs.map(
    (r) =>
      `<div class="chart gantt">${ganttSvg(r.events, { stages: r.stages, title: r.label, span, width: 1100 })}</div>`,
  );
  return `<section id="gantt"><h2>Gantt charts (one time axis: ${span.toFixed(1)} ms from each run's first task)</h2>${charts.join('\n')}</section>`;
}

function utilizationSection(runs: readonly ReportRun[]): string {
  const parts = runs.map((r) => {
    const use = stageUse(r.events, r.stages);
    const reasons = [...new Set(use.flatMap((u) => Object.keys(u.wait_ms)))].sort();
    const pct = (ms: number, u: { span_ms: number }) =>
      u.span_ms > 0 ? `${((100 * ms) / u.span_ms).toFixed(1)}%` : '';
    const body = use.map((u) => [
      `stage ${u.stage}`,
      pct(u.busy_ms, u),
      ...reasons.map((k) => pct(u.wait_ms[k] ?? 0, u)),
      pct(u.other_idle_ms, u),
      u.busy_ms.toFixed(1),
    ]);
    return (
      `<div class="run"><h3>${esc(r.label)}</h3><div class="chart">${utilizationSvg(use)}</div>` +
      table(['stage', 'busy', ...reasons.map((k) => `wait: ${k}`), 'other idle', 'busy ms'], body) +
      '</div>'
    );
  });
  return `<section id="utilization"><h2>Per-stage utilization and bubble</h2><p class="terms">Shares of the measured iterations' makespans; a wait is idle time with work left, by why the stage could not start it (nothing-ready: no input or gradient yet; binding: its schedule's next task is not ready; backpressure: the buffer limit).</p>${parts.join('\n')}</section>`;
}

function latencySection(runs: readonly ReportRun[]): string {
  const parts = runs.map((r) => {
    const h = latencyHistogram(r.events);
    const clocks =
      (r.processes ?? 1) > 1
        ? ` The stages ran in ${r.processes} processes: each latency also holds the offset between two processes' clocks.`
        : '';
    return `<div class="run"><h3>${esc(r.label)}</h3><p>${h.total} messages; median ${h.median.toFixed(3)} ms, 99th percentile ${h.p99.toFixed(3)} ms, max ${h.max.toFixed(3)} ms.${esc(clocks)}</p><div class="chart">${histogramSvg(h)}</div></div>`;
  });
  return `<section id="latency"><h2>Message latency</h2>${parts.join('\n')}</section>`;
}

function lossSection(losses: readonly ReportLoss[]): string {
  if (losses.length === 0) return '';
  const asyncRuns = losses.filter((l) => l.mode === 'async').length;
  const series = losses.map((l) => ({
    name: l.name,
    points: l.losses.map((y, i) => [l.firstIteration + i + 1, y] as const),
  }));
  const validation = losses.flatMap((l) =>
    l.valLoss === undefined
      ? []
      : [{ name: `${l.name} validation`, x: l.firstIteration + l.losses.length, y: l.valLoss }],
  );
  const svg = lossCurveSvg({
    title: 'training loss',
    xLabel:
      asyncRuns === 0
        ? 'iteration'
        : asyncRuns === losses.length
          ? 'update (one per microbatch)'
          : 'iteration (sync) or update (async)',
    series,
    validation,
    width: 1000,
    height: 420,
  });
  return `<section id="loss"><h2>Loss</h2><div class="chart">${svg}</div></section>`;
}

/** The swaps of the policy actor (a `swaps` list in a run's JSON), when there are any. */
function swapsSection(rows: readonly Row[]): string {
  const swaps = rows.flatMap((r) => (Array.isArray(r.swaps) ? (r.swaps as unknown[]) : []));
  if (swaps.length === 0) return '';
  const keys = [...new Set(swaps.flatMap((s) => (s && typeof s === 'object' ? Object.keys(s) : [])))];
  const cell = (v: unknown) => (v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v));
  const body = swaps.map((s) => keys.map((k) => cell((s as Record<string, unknown>)?.[k])));
  return `<section id="swaps"><h2>Policy swaps (${swaps.length})</h2>${table(keys, body)}</section>`;
}

const CSS = `body{font-family:Helvetica,Arial,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ccc;padding-bottom:4px;margin-top:32px}h3{font-size:14px}
table.data{border-collapse:collapse;font-size:13px;margin:8px 0}table.data th,table.data td{border:1px solid #ddd;padding:3px 8px;text-align:right}
table.data th{background:#f1f3f4;cursor:pointer}table.data td:first-child,table.data th:first-child{text-align:left}
.terms,.shape,.source{font-size:12px;color:#555}.chart{margin:8px 0;overflow-x:auto}`;

// Click a column head to sort its table by it (numbers as numbers), again to reverse.
const SCRIPT = `document.querySelectorAll('table.data th').forEach(function (th, col) {
  th.addEventListener('click', function () {
    var body = th.closest('table').tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var dir = th.dataset.dir === 'asc' ? -1 : 1;
    th.dataset.dir = dir === 1 ? 'asc' : 'desc';
    var key = function (r) { var t = r.cells[th.cellIndex].textContent; var n = parseFloat(t); return isNaN(n) ? t : n; };
    rows.sort(function (a, b) { var x = key(a), y = key(b); return (x < y ? -1 : x > y ? 1 : 0) * dir; });
    rows.forEach(function (r) { body.appendChild(r); });
  });
});`;

export function reportHtml(d: ReportData): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<title>${esc(d.title)}</title><style>${CSS}</style></head>
<body><h1>${esc(d.title)}</h1><p class="source">${esc(d.source)}</p>
${runTable(d.rows)}
${lossSection(d.losses)}
${ganttSection(d.runs)}
${d.runs.length > 0 ? utilizationSection(d.runs) : ''}
${d.runs.length > 0 ? latencySection(d.runs) : ''}
${swapsSection(d.rows)}
<script>${SCRIPT}</script>
</body></html>
`;
}
