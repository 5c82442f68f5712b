// The report of a FRESCO sweep (fresco-sweep.ts), from its cached runs alone: the LR
// each method got at each depth (the paper's rule on the first seed), the slowdown
// table (updates to a target loss against P = 1, median and range over seeds, with the
// P = 1 projection control beside), final loss against P (FRESCO's Fig. 4a), loss
// curves per depth, measured extra memory per method and wall time per update.

import { ConsistencyMethod } from '../actors/param-store';
import { formatTable } from '../cli/table';
import { median } from '../checks/stats';
import { RunResult, SWEEP_METHODS, SweepPreset, bestRun, ema, finalLoss } from './fresco-sweep';

/** Fraction of the updates at which the P = 1 reference's smoothed loss sets the target. */
export const TARGET_AT = 0.7;

/** First update (1-based) at which the smoothed loss is at or below `target`, or null. */
export function updatesToReach(smoothed: readonly number[], target: number): number | null {
  const i = smoothed.findIndex((x) => x <= target);
  return i < 0 ? null : i + 1;
}

/** Median of values where null means "not reached" (above everything); null when the median is. */
export function censoredMedian(xs: readonly (number | null)[]): number | null {
  const s = [...xs].sort((a, b) => (a === null ? 1 : b === null ? -1 : a - b));
  if (s.length === 0) return null;
  const lo = s[Math.floor((s.length - 1) / 2)]!,
    hi = s[Math.ceil((s.length - 1) / 2)]!;
  return lo === null || hi === null ? null : (lo + hi) / 2;
}

export interface Cell {
  stages: number;
  method: string;
  lr: number;
  /** Whether the LR sweep ran for this cell (else the first LR). */
  swept: boolean;
  runs: RunResult[];
  /** Set when seed 0 picked this LR but the other seeds have not run at it (the cell stays at the first LR). */
  bestOnSeed0?: number;
}

/** Equal learning rates (parsed from JSON and written as literals). */
export const same = (a: number, b: number) => Math.abs(a - b) <= 1e-12 * Math.max(Math.abs(a), Math.abs(b));

export function buildCells(
  p: SweepPreset,
  all: readonly RunResult[],
): { cells: Cell[]; controls: Cell[]; reference: Cell; alphas: RunResult[] } {
  const seed0 = p.seeds[0]!;
  const main = all.filter((r) => r.method !== 'projection-control' && r.alpha === 0.25);
  const cellOf = (stages: number, method: ConsistencyMethod): Cell | null => {
    const rs = main.filter((r) => r.stages === stages && r.method === method);
    const sweep = rs.filter((r) => r.seed === seed0);
    if (sweep.length === 0) return null;
    const best = bestRun(sweep);
    const swept = p.lrs.every((lr) => sweep.some((r) => same(r.lr, lr)));
    const atBest = rs.filter((r) => same(r.lr, best.lr));
    const atFirst = rs.filter((r) => same(r.lr, p.lrs[0]!));
    // A best LR whose other seeds have not run yet: the table stays at the first LR, saying so.
    if (atBest.length < atFirst.length)
      return { stages, method, lr: p.lrs[0]!, swept, runs: atFirst, bestOnSeed0: best.lr };
    return { stages, method, lr: best.lr, swept, runs: atBest };
  };
  const reference = cellOf(1, 'inconsistent');
  if (!reference) throw new Error('the sweep has no P = 1 reference run yet');
  const cells: Cell[] = [];
  for (const P of p.depths.filter((d) => d > 1))
    for (const m of SWEEP_METHODS) {
      const c = cellOf(P, m);
      if (c) cells.push(c);
    }
  const lr0 = p.lrs[0]!;
  const controls = p.depths
    .filter((d) => d > 1)
    .map((P) => ({
      stages: P,
      method: 'projection-control',
      lr: lr0,
      swept: false,
      runs: all.filter((r) => r.method === 'projection-control' && r.controlStages === P && same(r.lr, lr0)),
    }))
    .filter((c) => c.runs.length > 0);
  const alphas = all.filter((r) => r.method === 'fresco' && r.alpha !== 0.25);
  return { cells, controls, reference, alphas };
}

/** Per seed: the target (reference's smoothed loss at TARGET_AT of the updates) and the updates the reference needs. */
function targets(ref: readonly RunResult[]): Map<number, { target: number; updates: number }> {
  return new Map(
    ref.map((r) => {
      const s = ema(r.losses);
      const target = s[Math.floor(TARGET_AT * s.length) - 1]!;
      return [r.seed, { target, updates: updatesToReach(s, target)! }];
    }),
  );
}

export interface Slowdown {
  stages: number;
  method: string;
  lr: number;
  swept: boolean;
  bestOnSeed0?: number;
  seeds: number;
  /** Per seed, null when the target was not reached. */
  slowdowns: (number | null)[];
  median: number | null;
  min: number | null;
  max: number | null;
  finalLoss: { median: number; min: number; max: number };
  extraBytes: number;
  msPerUpdate: number;
}

function slowdownOf(c: Cell, ref: Map<number, { target: number; updates: number }>): Slowdown {
  const runs = c.runs.filter((r) => ref.has(r.seed));
  const sl = runs.map((r) => {
    const t = ref.get(r.seed)!;
    const n = updatesToReach(ema(r.losses), t.target);
    return n === null ? null : n / t.updates;
  });
  const reached = sl.filter((x): x is number => x !== null);
  const fl = runs.map(finalLoss);
  return {
    stages: c.stages,
    method: c.method,
    lr: c.lr,
    swept: c.swept,
    ...(c.bestOnSeed0 === undefined ? {} : { bestOnSeed0: c.bestOnSeed0 }),
    seeds: runs.length,
    slowdowns: sl,
    median: censoredMedian(sl),
    min: reached.length ? Math.min(...reached) : null,
    max: reached.length === sl.length && sl.length > 0 ? Math.max(...reached) : null,
    finalLoss: { median: median(fl), min: Math.min(...fl), max: Math.max(...fl) },
    extraBytes: median(runs.map((r) => r.extraStateBytes)),
    msPerUpdate: median(runs.map((r) => (1000 * r.seconds) / r.updates)),
  };
}

export function analyse(p: SweepPreset, all: readonly RunResult[]) {
  const { cells, controls, reference, alphas } = buildCells(p, all);
  const ref = targets(reference.runs);
  // The control runs at the first LR: its reference is the P = 1 run at that LR, same seed.
  const lr0Ref = targets(
    all.filter((r) => r.stages === 1 && r.method === 'inconsistent' && same(r.lr, p.lrs[0]!) && r.alpha === 0.25),
  );
  return {
    reference: {
      lr: reference.lr,
      swept: reference.swept,
      seeds: reference.runs.map((r) => r.seed),
      targets: Object.fromEntries(ref),
    },
    rows: cells.map((c) => slowdownOf(c, ref)),
    controls: controls.map((c) => slowdownOf(c, lr0Ref)),
    referenceRow: slowdownOf(reference, ref),
    alphas: [
      ...cells
        .filter((c) => c.method === 'fresco' && alphas.some((r) => r.stages === c.stages))
        .flatMap((c) => c.runs.filter((r) => r.seed === p.seeds[0])),
      ...alphas,
    ].map((r) => ({ alpha: r.alpha, stages: r.stages, lr: r.lr, seed: r.seed, finalLoss: finalLoss(r) })),
    curves: cells.map((c) => ({
      stages: c.stages,
      method: c.method,
      smoothed: ema(c.runs.find((r) => r.seed === p.seeds[0])?.losses ?? c.runs[0]!.losses),
    })),
    referenceCurve: ema(reference.runs.find((r) => r.seed === p.seeds[0])?.losses ?? reference.runs[0]!.losses),
  };
}

const x2 = (v: number | null, censoredAbove?: string) => (v === null ? (censoredAbove ?? '-') : `${v.toFixed(2)}x`);

type Analysis = ReturnType<typeof analyse>;
type CellOf = (P: number, m: string) => Analysis['rows'][number] | undefined;

/** Final training loss against P (Fig. 4a), with the P=1 projection control. */
function finalLossTable(depths: number[], methods: string[], cell: CellOf, a: Analysis): string {
  return formatTable(
    ['method', 'P=1', ...depths.map((P) => `P=${P}`)],
    [
      ...methods.map((m) => [
        m,
        a.referenceRow.finalLoss.median.toFixed(4),
        ...depths.map((P) => {
          const r = cell(P, m);
          return r
            ? `${r.finalLoss.median.toFixed(4)} [${r.finalLoss.min.toFixed(3)}–${r.finalLoss.max.toFixed(3)}]`
            : '-';
        }),
      ]),
      [
        'P=1 projection control',
        '-',
        ...depths.map((P) => {
          const c = a.controls.find((x) => x.stages === P);
          return c
            ? `${c.finalLoss.median.toFixed(4)} [${c.finalLoss.min.toFixed(3)}–${c.finalLoss.max.toFixed(3)}]`
            : '-';
        }),
      ],
    ],
    'Final training loss (EMA 0.97) against P: median [min–max] over seeds (Fig. 4a)',
  );
}

/** At the deepest P: each method's measured extra memory and wall time per update. */
function memoryTable(deepest: number, methods: string[], cell: CellOf): string {
  const fresco = cell(deepest, 'fresco');
  return formatTable(
    ['method', 'extra memory (bytes, all stages)', 'vs FRESCO', 'wall ms / update'],
    methods.map((m) => {
      const r = cell(deepest, m);
      return r
        ? [
            m,
            String(r.extraBytes),
            fresco && fresco.extraBytes > 0 ? `${(r.extraBytes / fresco.extraBytes).toFixed(1)}x` : '-',
            r.msPerUpdate.toFixed(0),
          ]
        : [m, '-', '-', '-'];
    }),
    `At P=${deepest}: peak bytes each stage's policy held beyond parameters and optimizer state, summed over stages (measured); wall time per update of the whole pipeline in one process on the virtual clock (shared machine: indicative)`,
  );
}

export function formatReport(p: SweepPreset, a: ReturnType<typeof analyse>): string {
  const depths = [...new Set(a.rows.map((r) => r.stages))].sort((x, y) => x - y);
  const methods = [...SWEEP_METHODS];
  const cell = (P: number, m: string) => a.rows.find((r) => r.stages === P && r.method === m);
  const slow = (r: Slowdown | undefined) =>
    !r
      ? 'not run'
      : `${x2(r.median, 'not reached')} [${x2(r.min)}–${r.max === null ? 'n.r.' : x2(r.max)}] n=${r.seeds}`;
  const out: string[] = [];
  out.push(
    formatTable(
      ['method', ...depths.map((P) => `P=${P}`)],
      [
        ...methods.map((m) => [m, ...depths.map((P) => slow(cell(P, m)))]),
        ['P=1 projection control', ...depths.map((P) => slow(a.controls.find((c) => c.stages === P)))],
      ],
      `Slowdown: updates to the target loss against P=1 (median [min–max] over seeds; target = P=1's EMA loss at ${Math.round(100 * TARGET_AT)}% of ${p.updates} updates, per seed). The control is FRESCO's projection of depth P applied at P=1.`,
    ),
  );
  out.push(finalLossTable(depths, methods, cell, a));
  out.push(
    formatTable(
      ['method', ...depths.map((P) => `P=${P}`)],
      methods.map((m) => [
        m,
        ...depths.map((P) => {
          const r = cell(P, m);
          return !r
            ? '-'
            : r.bestOnSeed0 !== undefined
              ? `${r.lr} (seed 0 picks ${r.bestOnSeed0}; other seeds not run at it)`
              : `${r.lr}${r.swept ? '' : ' (not swept)'}`;
        }),
      ]),
      `Peak LR chosen on seed ${p.seeds[0]} from {${p.lrs.join(', ')}} by the lowest final EMA loss; P=1 reference: ${a.reference.lr}${a.reference.swept ? '' : ' (not swept)'}`,
    ),
  );
  const deepest = Math.max(...depths);
  out.push(memoryTable(deepest, methods, cell));
  if (a.alphas.length > 1) {
    const rows = [...a.alphas].sort((x, y) => x.stages - y.stages || x.alpha - y.alpha);
    out.push(
      formatTable(
        ['P', 'alpha', 'LR', `final loss (seed ${p.seeds[0]})`],
        rows.map((r) => [String(r.stages), String(r.alpha), String(r.lr), r.finalLoss.toFixed(4)]),
        "FRESCO's protection budget at the deepest P of each α sweep (at the LR chosen with alpha 0.25)",
      ),
    );
  }
  return out.join('\n\n');
}
