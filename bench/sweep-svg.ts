// The SVG figures of a FRESCO sweep report: final loss against P (FRESCO's Fig. 4a) and
// the loss curves of every method at one depth (its Fig. 4's other panels).

/** One colour per method (and P=1), the same in every figure. */
export const METHOD_COLORS: Record<string, string> = {
  inconsistent: '#d62728',
  stash: '#1f77b4',
  recovery: '#9467bd',
  spectrain: '#8c564b',
  pipeoptim: '#ff7f0e',
  lwp: '#e377c2',
  fresco: '#2ca02c',
  'projection-control': '#7f7f7f',
  'P=1': '#000000',
};

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;');

interface Series {
  readonly name: string;
  readonly points: readonly (readonly [number, number])[];
  readonly dash?: string;
}

function chart(
  title: string,
  xLabel: string,
  yLabel: string,
  series: readonly Series[],
  xTicks: readonly number[],
  logX: boolean,
): string {
  const W = 1000,
    H = 620,
    pad = 64;
  const xs = series.flatMap((s) => s.points.map((p) => p[0])),
    ys = series.flatMap((s) => s.points.map((p) => p[1]));
  const fx = (v: number) => (logX ? Math.log2(v) : v);
  const x0 = Math.min(...xs.map(fx)),
    x1 = Math.max(...xs.map(fx));
  const y0 = ys.reduce((a, b) => Math.min(a, b), Infinity),
    y1 = ys.reduce((a, b) => Math.max(a, b), -Infinity);
  const X = (v: number) => pad + ((W - 2 * pad - 160) * (fx(v) - x0)) / Math.max(1e-9, x1 - x0);
  const Y = (v: number) => H - pad - ((H - 2 * pad) * (v - y0)) / Math.max(1e-9, y1 - y0);
  const lines = series.map((s) => {
    const d = s.points.map((p, i) => `${i ? 'L' : 'M'}${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`).join('');
    const dots =
      s.points.length < 12
        ? s.points
            .map(
              (p) =>
                `<circle cx="${X(p[0]).toFixed(1)}" cy="${Y(p[1]).toFixed(1)}" r="3" fill="${METHOD_COLORS[s.name] ?? '#333'}"/>`,
            )
            .join('')
        : '';
    return `<path d="${d}" fill="none" stroke="${METHOD_COLORS[s.name] ?? '#333'}" stroke-width="1.6" stroke-dasharray="${s.dash ?? ''}"><title>${esc(s.name)}</title></path>${dots}`;
  });
  const yt = Array.from({ length: 6 }, (_, i) => y0 + ((y1 - y0) * i) / 5).map(
    (v) =>
      `<line x1="${pad}" x2="${W - pad - 160}" y1="${Y(v)}" y2="${Y(v)}" stroke="#eee"/><text x="${pad - 6}" y="${Y(v) + 4}" text-anchor="end" font-size="12">${v.toFixed(3)}</text>`,
  );
  const xt = xTicks.map((v) => `<text x="${X(v)}" y="${H - pad + 18}" text-anchor="middle" font-size="12">${v}</text>`);
  const legend = series.map(
    (s, i) =>
      `<line x1="${W - pad - 140}" x2="${W - pad - 110}" y1="${pad + 18 * i}" y2="${pad + 18 * i}" stroke="${METHOD_COLORS[s.name] ?? '#333'}" stroke-width="2" stroke-dasharray="${s.dash ?? ''}"/><text x="${W - pad - 104}" y="${pad + 18 * i + 4}" font-size="12">${esc(s.name)}</text>`,
  );
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" font-family="sans-serif"><rect width="${W}" height="${H}" fill="white"/>` +
    `<text x="${pad}" y="30" font-size="15" font-weight="bold">${esc(title)}</text>${yt.join('')}${xt.join('')}${lines.join('')}${legend.join('')}` +
    `<text x="${(W - 160) / 2}" y="${H - 14}" text-anchor="middle" font-size="13">${esc(xLabel)}</text>` +
    `<text x="16" y="${H / 2}" font-size="13" transform="rotate(-90 16 ${H / 2})" text-anchor="middle">${esc(yLabel)}</text></svg>`
  );
}

/** Median final loss per method against P (P = 1 is the shared reference). */
export function finalLossSvg(
  title: string,
  p1: number,
  rows: readonly { stages: number; method: string; finalLoss: { median: number } }[],
  controls: readonly { stages: number; finalLoss: { median: number } }[],
): string {
  const methods = [...new Set(rows.map((r) => r.method))];
  const depths = [1, ...new Set(rows.map((r) => r.stages))].sort((a, b) => a - b);
  const series: Series[] = methods.map((m) => ({
    name: m,
    points: [
      [1, p1] as const,
      ...rows.filter((r) => r.method === m).map((r) => [r.stages, r.finalLoss.median] as const),
    ],
  }));
  if (controls.length)
    series.push({
      name: 'projection-control',
      dash: '4,3',
      points: controls.map((c) => [c.stages, c.finalLoss.median] as const),
    });
  return chart(
    title,
    'pipeline depth P (control: the depth whose projection runs at P=1)',
    'final training loss (EMA 0.97), median over seeds',
    series,
    depths,
    true,
  );
}

/** Smoothed loss curves of every method at one depth, with the P = 1 reference. */
export function curvesSvg(
  title: string,
  reference: readonly number[],
  curves: readonly { method: string; smoothed: readonly number[] }[],
): string {
  const pts = (ys: readonly number[]) => ys.map((y, i) => [i + 1, y] as const);
  const series: Series[] = [
    { name: 'P=1', dash: '5,4', points: pts(reference) },
    ...curves.map((c) => ({ name: c.method, points: pts(c.smoothed) })),
  ];
  const n = reference.length;
  const step = Math.max(1, Math.round(n / 8));
  return chart(
    title,
    'update',
    'training loss (EMA 0.97)',
    series,
    Array.from({ length: Math.floor(n / step) + 1 }, (_, i) => Math.max(1, i * step)),
    false,
  );
}
