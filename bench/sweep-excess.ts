// The cost of asynchrony in a FRESCO sweep, paired by seed, with the projection's own
// effect taken out: every method is exact at P = 1, so a baseline's cost at depth P is its
// final loss minus the P = 1 reference's in the same seed; FRESCO's projection also changes
// the optimizer (it helps by itself at P = 1), so FRESCO's cost is its final loss minus its
// P = 1 projection control's (same projection, nothing in flight), at the first LR where
// both ran. The third row is the projection's effect alone: control minus P = 1, same LR.

import { formatTable } from '../cli/table';
import { RunResult, SWEEP_METHODS, SweepPreset, finalLoss } from './fresco-sweep';
import { buildCells, same } from './sweep-report';
import { median } from '../checks/stats';

export interface ExcessRow {
  readonly label: string;
  readonly stages: number;
  /** Per seed: final loss minus its pair's. */
  readonly diffs: number[];
}

function paired(xs: readonly RunResult[], ys: readonly RunResult[]): number[] {
  return xs.flatMap((x) => {
    const y = ys.find((r) => r.seed === x.seed);
    return y ? [finalLoss(x) - finalLoss(y)] : [];
  });
}

export function excessRows(p: SweepPreset, all: readonly RunResult[]): ExcessRow[] {
  const { cells, reference } = buildCells(p, all);
  const lr0 = p.lrs[0]!;
  const at = (stages: number, method: string, lr: number) =>
    all.filter((r) => r.stages === stages && r.method === method && same(r.lr, lr) && r.alpha === 0.25);
  const control = (P: number) => at(1, 'projection-control', lr0).filter((r) => r.controlStages === P);
  const rows: ExcessRow[] = cells.map((c) => ({
    label: `${c.method} − P=1`,
    stages: c.stages,
    diffs: paired(c.runs, reference.runs),
  }));
  for (const P of p.depths.filter((d) => d > 1)) {
    rows.push({ label: 'fresco − its P=1 control', stages: P, diffs: paired(at(P, 'fresco', lr0), control(P)) });
    rows.push({
      label: 'P=1 control − P=1 (the projection alone)',
      stages: P,
      diffs: paired(control(P), at(1, 'inconsistent', lr0)),
    });
  }
  return rows.filter((r) => r.diffs.length > 0);
}

const signed = (x: number) => `${x >= 0 ? '+' : '−'}${Math.abs(x).toFixed(3)}`;

function summary(d: readonly number[]): string {
  const s = [...d].sort((a, b) => a - b);
  return `${signed(median(s))} [${signed(s[0]!)}…${signed(s.at(-1)!)}] n=${s.length}`;
}

export function formatExcess(p: SweepPreset, rows: readonly ExcessRow[]): string {
  const depths = [...new Set(rows.map((r) => r.stages))].sort((a, b) => a - b);
  const labels = [
    ...SWEEP_METHODS.map((m) => `${m} − P=1`),
    'fresco − its P=1 control',
    'P=1 control − P=1 (the projection alone)',
  ].filter((l) => rows.some((r) => r.label === l));
  return formatTable(
    ['final loss difference', ...depths.map((P) => `P=${P}`)],
    labels.map((l) => [
      l,
      ...depths.map((P) => {
        const r = rows.find((x) => x.label === l && x.stages === P);
        return r ? summary(r.diffs) : '-';
      }),
    ]),
    `The cost of asynchrony, paired by seed (median [min…max] of the final-loss difference): each method at its chosen LR minus the P=1 reference; FRESCO minus its own P=1 projection control at ${p.lrs[0]} (the projection's optimizer effect taken out); and that control minus P=1 at ${p.lrs[0]}`,
  );
}
