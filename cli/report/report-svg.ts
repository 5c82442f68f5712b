// The report's small charts as inline SVG: per-stage utilization bars (busy, each wait
// reason, other idle) and the message-latency histogram.

import { escapeXml } from '../trace/gantt';
import { Histogram, StageUse } from './report-stats';

const PARTS: readonly [key: string, label: string, color: string][] = [
  ['busy', 'busy', '#1e88e5'],
  ['nothing-ready', 'waiting: nothing ready', '#ffb300'],
  ['binding', 'waiting: binding schedule', '#8e24aa'],
  ['backpressure', 'waiting: buffer limit', '#e53935'],
  ['tp-defer', 'waiting: TP group', '#6d4c41'],
  ['other', 'other idle', '#cfd8dc'],
];

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

function shares(u: StageUse): [string, number][] {
  const span = u.span_ms > 0 ? u.span_ms : 1;
  return PARTS.map(([key]) => [
    key,
    (key === 'busy' ? u.busy_ms : key === 'other' ? u.other_idle_ms : (u.wait_ms[key] ?? 0)) / span,
  ]);
}

/** One horizontal bar per stage split into busy, waits by reason and other idle, with a legend. */
export function utilizationSvg(use: readonly StageUse[], width = 640): string {
  const left = 64;
  const barW = width - left - 70;
  const rowH = 22;
  const top = 10;
  const shown = PARTS.filter(([key]) => use.some((u) => shares(u).some(([k, v]) => k === key && v > 0)));
  const legendY = top + use.length * rowH + 16;
  const height = legendY + Math.ceil(shown.length / 3) * 16 + 6;
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" class="utilization" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" font-family="Helvetica, Arial, sans-serif" font-size="11">`,
  ];
  use.forEach((u, i) => {
    const y = top + i * rowH;
    out.push(`<text x="${left - 6}" y="${y + 14}" text-anchor="end">stage ${u.stage}</text>`);
    let x = left;
    for (const [key, share] of shares(u)) {
      if (share <= 0) continue;
      const w = Math.min(share, 1) * barW;
      const [, label, color] = PARTS.find(([k]) => k === key)!;
      out.push(
        `<rect x="${x.toFixed(1)}" y="${y}" width="${w.toFixed(1)}" height="${rowH - 6}" fill="${color}"><title>${escapeXml(`stage ${u.stage}: ${label} ${pct(share)}`)}</title></rect>`,
      );
      x += w;
    }
    const busy = u.span_ms > 0 ? u.busy_ms / u.span_ms : 0;
    out.push(`<text x="${left + barW + 6}" y="${y + 14}">${pct(busy)} busy</text>`);
  });
  shown.forEach(([, label, color], i) => {
    const x = left + (i % 3) * 190;
    const y = legendY + Math.floor(i / 3) * 16;
    out.push(`<rect x="${x}" y="${y - 9}" width="10" height="10" fill="${color}"/>`);
    out.push(`<text x="${x + 14}" y="${y}">${escapeXml(label)}</text>`);
  });
  out.push('</svg>');
  return out.join('\n');
}

/** Bars of message counts per latency bin; the last bin holds everything above the 99th percentile. */
export function histogramSvg(h: Histogram, width = 640, height = 220): string {
  const left = 48;
  const bottom = height - 36;
  const plotW = width - left - 16;
  const plotH = bottom - 12;
  const top = Math.max(1, ...h.counts);
  const barW = plotW / h.counts.length;
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" class="latency" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" font-family="Helvetica, Arial, sans-serif" font-size="11">`,
    `<line x1="${left}" y1="${bottom}" x2="${left + plotW}" y2="${bottom}" stroke="#333"/>`,
    `<text x="${left - 6}" y="${bottom - plotH + 4}" text-anchor="end">${top}</text>`,
    `<text x="${left - 6}" y="${bottom}" text-anchor="end">0</text>`,
  ];
  h.counts.forEach((c, i) => {
    const bh = (c / top) * plotH;
    const x = left + i * barW;
    const range =
      i === h.counts.length - 1
        ? `≥ ${h.edges[i].toFixed(2)} ms`
        : `${h.edges[i].toFixed(2)}–${(h.edges[i] + h.width).toFixed(2)} ms`;
    out.push(
      `<rect x="${(x + 1).toFixed(1)}" y="${(bottom - bh).toFixed(1)}" width="${Math.max(barW - 2, 1).toFixed(1)}" height="${bh.toFixed(1)}" fill="#43a047"><title>${escapeXml(`${range}: ${c} messages`)}</title></rect>`,
    );
    if (i % 4 === 0)
      out.push(`<text x="${x.toFixed(1)}" y="${bottom + 14}" text-anchor="middle">${h.edges[i].toFixed(1)}</text>`);
  });
  out.push(
    `<text x="${left + plotW / 2}" y="${bottom + 30}" text-anchor="middle">latency (ms): receive time − send time; last bar: above the 99th percentile</text>`,
    '</svg>',
  );
  return out.join('\n');
}
