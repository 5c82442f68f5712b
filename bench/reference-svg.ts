// The reference benchmark's picture (bench/offline-reference.ts --svg): one row per cell
// (profile, P, limit) and two panels, offline/bound (what the lower bound leaves unexplained)
// and bf/offline (how far bf is from the clairvoyant reference), each seed a dot and the
// median a bar, with the target (offline/bound 1.10) drawn in the first panel.

export interface ReferenceRun {
  readonly profile: string;
  readonly stages: number;
  readonly limit: number | string;
  readonly seed: number;
  readonly 'offline/bound': number;
  readonly 'bf/offline': number;
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;');
const PANELS = ['offline/bound', 'bf/offline'] as const;
const TARGET = 1.1;

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/** Ticks every 0.1 (every 0.2 past 2) from 1 to just past `max`. */
function ticks(max: number): number[] {
  const step = max > 2 ? 0.2 : 0.1;
  const out: number[] = [];
  for (let v = 1; v < max + step - 1e-9; v += step) out.push(Math.round(v * 10) / 10);
  return out;
}

export function referenceSvg(runs: readonly ReferenceRun[], title: string): string {
  const keys = [...new Set(runs.map((r) => `${r.profile} P=${r.stages} limit ${r.limit}`))];
  const rowOf = (r: ReferenceRun) => keys.indexOf(`${r.profile} P=${r.stages} limit ${r.limit}`);
  const rowH = 30,
    top = 70,
    left = 190,
    panelW = 380,
    gap = 80;
  const W = left + PANELS.length * (panelW + gap),
    H = top + keys.length * rowH + 60;
  const parts: string[] = [
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="12" y="24" font-size="15" font-weight="bold">${esc(title)}</text>`,
  ];
  keys.forEach((k, i) => {
    const y = top + i * rowH + rowH / 2;
    if (i % 2 === 0) parts.push(`<rect x="0" y="${y - rowH / 2}" width="${W}" height="${rowH}" fill="#f6f6f6"/>`);
    parts.push(`<text x="${left - 10}" y="${y + 4}" text-anchor="end" font-size="12">${esc(k)}</text>`);
  });
  PANELS.forEach((panel, p) => {
    const x0 = left + p * (panelW + gap);
    const values = runs.map((r) => r[panel]).filter(Number.isFinite);
    const ts = ticks(Math.max(1.2, ...values));
    const X = (v: number) => x0 + (panelW * (v - 1)) / (ts[ts.length - 1] - 1);
    parts.push(
      `<text x="${x0 + panelW / 2}" y="${top - 24}" text-anchor="middle" font-size="13" font-weight="bold">${panel}</text>`,
    );
    for (const t of ts)
      parts.push(
        `<line x1="${X(t)}" x2="${X(t)}" y1="${top}" y2="${top + keys.length * rowH}" stroke="#ddd"/>`,
        `<text x="${X(t)}" y="${top + keys.length * rowH + 16}" text-anchor="middle" font-size="11">${t.toFixed(1)}</text>`,
      );
    if (panel === 'offline/bound')
      parts.push(
        `<line x1="${X(TARGET)}" x2="${X(TARGET)}" y1="${top - 8}" y2="${top + keys.length * rowH}" stroke="#d62728" stroke-dasharray="4,3"/>`,
        `<text x="${X(TARGET) + 4}" y="${top - 8}" font-size="11" fill="#d62728">target ${TARGET.toFixed(2)} (limit 8, P=8)</text>`,
      );
    keys.forEach((k, i) => {
      // A run without this ratio (null in a saved result) has no dot.
      const mine = runs.filter((r) => rowOf(r) === i && Number.isFinite(r[panel]));
      const y = top + i * rowH + rowH / 2;
      for (const r of mine)
        parts.push(
          `<circle cx="${X(r[panel]).toFixed(1)}" cy="${y}" r="3.5" fill="#1f77b4" fill-opacity="0.55"><title>${esc(k)} seed ${r.seed}: ${r[panel].toFixed(3)}</title></circle>`,
        );
      if (mine.length === 0) return;
      const m = median(mine.map((r) => r[panel]));
      parts.push(
        `<line x1="${X(m).toFixed(1)}" x2="${X(m).toFixed(1)}" y1="${y - 9}" y2="${y + 9}" stroke="#000" stroke-width="2"><title>${esc(k)} median ${m.toFixed(3)}</title></line>`,
      );
    });
  });
  parts.push(
    `<text x="12" y="${H - 14}" font-size="11">each dot one seed, the bar the median; offline/bound: 1 = the reference meets the lower bound (both exact); bf/offline: 1 = bf as good as the clairvoyant schedule</text>`,
  );
  return `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" font-family="sans-serif">${parts.join('')}</svg>\n`;
}
