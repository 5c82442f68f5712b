// A loss curve as standalone SVG (train --plot, and the report's loss section): one
// polyline per series against the iteration or update, validation losses as marked points,
// axes with ticks and a legend. Points whose loss is not finite (a diverged run) are
// left out of the line and counted in the subtitle.

import { escapeXml, tickStep } from '../trace/gantt';

export interface LossSeries {
  readonly name: string;
  /** [iteration or update, loss]. */
  readonly points: readonly (readonly [number, number])[];
}

export interface LossPoint {
  readonly name: string;
  readonly x: number;
  readonly y: number;
}

export interface LossPlot {
  readonly title: string;
  readonly xLabel: string;
  readonly series: readonly LossSeries[];
  readonly validation?: readonly LossPoint[];
  readonly width?: number;
  readonly height?: number;
}

const COLORS = ['#1565c0', '#c62828', '#2e7d32', '#ef6c00', '#6a1b9a', '#00838f', '#5d4037', '#ad1457'];

const label = (v: number) =>
  Math.abs(v) >= 100 || Number.isInteger(v) ? v.toFixed(0) : String(Number(v.toPrecision(3)));

interface Frame {
  x: (v: number) => number;
  y: (v: number) => number;
  x0: number;
  x1: number;
  y0: number;
  y1: number;
  left: number;
  top: number;
  plotW: number;
  plotH: number;
}

function frameOf(xs: number[], ys: number[], width: number, height: number): Frame {
  const left = 64;
  const top = 48;
  const plotW = width - left - 24;
  const plotH = height - top - 64;
  const x0 = Math.min(...xs);
  let x1 = Math.max(...xs);
  let y0 = Math.min(...ys);
  let y1 = Math.max(...ys);
  if (!(y1 > y0)) [y0, y1] = [y0 - 0.5, y1 + 0.5];
  const pad = (y1 - y0) * 0.05;
  y0 -= pad;
  y1 += pad;
  if (x1 === x0) x1 = x0 + 1;
  return {
    x: (v) => left + ((v - x0) / (x1 - x0)) * plotW,
    y: (v) => top + plotH - ((v - y0) / (y1 - y0)) * plotH,
    x0,
    x1,
    y0,
    y1,
    left,
    top,
    plotW,
    plotH,
  };
}

function axes(f: Frame, xLabel: string): string[] {
  const out: string[] = [];
  const bottom = f.top + f.plotH;
  out.push(`<rect x="${f.left}" y="${f.top}" width="${f.plotW}" height="${f.plotH}" fill="#fafafa" stroke="#90a4ae"/>`);
  // Iterations and updates are whole numbers: no tick between two of them.
  const xs = Math.max(1, tickStep(f.x1 - f.x0, 8));
  for (let v = Math.ceil(f.x0 / xs) * xs; v <= f.x1 + xs * 1e-6; v += xs) {
    const px = f.x(v).toFixed(1);
    out.push(`<line x1="${px}" y1="${bottom}" x2="${px}" y2="${bottom + 5}" stroke="#333"/>`);
    out.push(`<text x="${px}" y="${bottom + 18}" font-size="11" text-anchor="middle">${label(v)}</text>`);
  }
  const ys = tickStep(f.y1 - f.y0, 6);
  for (let v = Math.ceil(f.y0 / ys) * ys; v <= f.y1 + ys * 1e-6; v += ys) {
    const py = f.y(v).toFixed(1);
    out.push(`<line x1="${f.left}" y1="${py}" x2="${f.left + f.plotW}" y2="${py}" stroke="#e0e0e0"/>`);
    out.push(`<text x="${f.left - 6}" y="${Number(py) + 4}" font-size="11" text-anchor="end">${label(v)}</text>`);
  }
  out.push(
    `<text x="${f.left + f.plotW / 2}" y="${bottom + 36}" font-size="12" text-anchor="middle">${escapeXml(xLabel)}</text>`,
    `<text x="16" y="${f.top + f.plotH / 2}" font-size="12" text-anchor="middle" transform="rotate(-90 16 ${f.top + f.plotH / 2})">loss</text>`,
  );
  return out;
}

export function lossCurveSvg(p: LossPlot): string {
  const width = p.width ?? 800;
  const height = p.height ?? 400;
  const finite = (pt: readonly [number, number]) => Number.isFinite(pt[0]) && Number.isFinite(pt[1]);
  const kept = p.series.map((s) => s.points.filter(finite));
  const dropped = p.series.reduce((a, s, i) => a + s.points.length - kept[i].length, 0);
  const val = (p.validation ?? []).filter((v) => Number.isFinite(v.x) && Number.isFinite(v.y));
  const xs = [...kept.flat().map((pt) => pt[0]), ...val.map((v) => v.x)];
  const ys = [...kept.flat().map((pt) => pt[1]), ...val.map((v) => v.y)];
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" class="loss-curve" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" font-family="Helvetica, Arial, sans-serif">`,
    `<rect x="0" y="0" width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="64" y="22" font-size="16" font-weight="bold">${escapeXml(p.title)}</text>`,
  ];
  const sub = `${kept.reduce((a, s) => a + s.length, 0)} training points${val.length > 0 ? `, ${val.length} validation` : ''}${dropped > 0 ? `; ${dropped} not finite, left out` : ''}`;
  out.push(`<text x="64" y="38" font-size="11" fill="#555">${escapeXml(sub)}</text>`);
  if (ys.length === 0) {
    out.push(`<text x="${width / 2}" y="${height / 2}" text-anchor="middle">no finite loss to plot</text>`, '</svg>');
    return out.join('\n');
  }
  const f = frameOf(xs, ys, width, height);
  out.push(...axes(f, p.xLabel));
  kept.forEach((pts, i) => {
    const color = COLORS[i % COLORS.length];
    const d = pts.map(([x, y]) => `${f.x(x).toFixed(1)},${f.y(y).toFixed(1)}`).join(' ');
    if (pts.length === 1)
      out.push(`<circle cx="${f.x(pts[0][0]).toFixed(1)}" cy="${f.y(pts[0][1]).toFixed(1)}" r="3" fill="${color}"/>`);
    else out.push(`<polyline class="loss" points="${d}" fill="none" stroke="${color}" stroke-width="1.6"/>`);
  });
  for (const v of val)
    out.push(
      `<rect class="validation" x="${(f.x(v.x) - 5).toFixed(1)}" y="${(f.y(v.y) - 5).toFixed(1)}" width="10" height="10" fill="#ffffff" stroke="#000" stroke-width="2"><title>${escapeXml(`${v.name}: ${v.y.toFixed(4)} at ${v.x}`)}</title></rect>`,
    );
  out.push(...legend(p.series, val.length > 0, f));
  out.push('</svg>');
  return out.join('\n');
}

function legend(series: readonly LossSeries[], validation: boolean, f: Frame): string[] {
  const out: string[] = [];
  let y = f.top + 14;
  const x = f.left + f.plotW - 200;
  series.forEach((s, i) => {
    out.push(
      `<line x1="${x}" y1="${y - 4}" x2="${x + 18}" y2="${y - 4}" stroke="${COLORS[i % COLORS.length]}" stroke-width="2"/>`,
    );
    out.push(`<text x="${x + 24}" y="${y}" font-size="11">${escapeXml(s.name)}</text>`);
    y += 16;
  });
  if (validation) {
    out.push(`<rect x="${x + 4}" y="${y - 9}" width="10" height="10" fill="#fff" stroke="#000" stroke-width="2"/>`);
    out.push(`<text x="${x + 24}" y="${y}" font-size="11">validation</text>`);
  }
  return out;
}
