// The tables of sim and run results: the columns they share, the offline reference's
// columns (when computed) after the efficiency, and the terms printed under them.

import { TABLE_TERMS, TERMS_BESIDE_REFERENCE, limitCell, perStage } from './compare-entry';
import { RATIO_NOTE, WithReference, referenceColumns } from './reference-flag';
import { formatTable } from './table';

/** One column: its heading and how a row fills it. */
export interface Column<R> {
  readonly head: string;
  readonly cell: (r: R) => string;
}

const column = <R>(head: string, cell: (r: R) => string): Column<R> => ({ head, cell });

/** The columns the tables share (with the digits of a time where they differ). */
export const COLUMNS = {
  policy: column('policy', (r: { policy: string }) => r.policy),
  limit: column('buffer limit', (r: { buffer_limit: unknown; binding: boolean }) =>
    limitCell(r.buffer_limit, r.binding),
  ),
  makespan: (digits: number) => column('makespan ms', (r: { makespan_ms: number }) => r.makespan_ms.toFixed(digits)),
  peak: column('peak in-flight', (r: { peak_inflight: readonly number[] }) => perStage(r.peak_inflight)),
  cap: column('cap', (r: { inflight_caps: readonly number[] }) => perStage(r.inflight_caps)),
  lowerBound: (digits: number) =>
    column('lower bound ms', (r: { lower_bound_ms: number }) => r.lower_bound_ms.toFixed(digits)),
  efficiency: column('efficiency', (r: { efficiency: number }) => r.efficiency.toFixed(3)),
  bubble: column('bubble', (r: { bubble_fraction: number }) => r.bubble_fraction.toFixed(3)),
};

/** The table of `rows`: the columns `before`, the offline reference's when it was computed, `after`; then what they mean. */
export function resultsTable<R>(
  rows: readonly WithReference<R>[],
  before: readonly Column<WithReference<R>>[],
  after: readonly Column<WithReference<R>>[],
  title: string,
): string {
  const ref = referenceColumns(rows);
  const table = formatTable(
    [...before.map((c) => c.head), ...ref.head, ...after.map((c) => c.head)],
    rows.map((r) => [...before.map((c) => c.cell(r)), ...ref.cells(r), ...after.map((c) => c.cell(r))]),
    title,
  );
  return `${table}\n${ref.head.length > 0 ? `${RATIO_NOTE}\n${TERMS_BESIDE_REFERENCE}` : TABLE_TERMS}`;
}
