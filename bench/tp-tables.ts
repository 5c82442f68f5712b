// The tp bench's tables (bench/tp-breakdown.ts): each cell is the median over the seeds and,
// when the seeds differ, its [min-max].

import { formatTable } from '../cli/table';
import type { Spread } from '../checks/stats';

type Row = Record<string, unknown>;

const range = (s: Spread, f: (x: number) => string) =>
  s.min === s.max ? f(s.median) : `${f(s.median)} [${f(s.min)}-${f(s.max)}]`;
const pct = (x: number) => `${(100 * x).toFixed(2)}%`;
const of = (r: Row, k: string) => r[k] as Spread;

/** RQ2: seconds per iteration and the mean stage actor's shares, per TP and policy. */
export function rq2Table(rows: readonly Row[]): string {
  return formatTable(
    ['TP', 'policy', 'iteration s', 'compute', 'blocking', 'TP peer wait', 'TP coord', 'sum', 'deferrals'],
    rows.map((r) => [
      String(r.tp),
      String(r.policy),
      range(of(r, 'iteration_ms'), (ms) => (ms / 1000).toFixed(3)),
      range(of(r, 'compute_share'), pct),
      range(of(r, 'blocking_share'), pct),
      range(of(r, 'tp_peer_wait_share'), pct),
      range(of(r, 'tp_coordination_share'), pct),
      range(of(r, 'tp_round_share'), pct),
      range(of(r, 'deferrals'), String),
    ]),
  );
}

/** RQ1: bf's and bfw's speedup over binding 1f1b per cell, with peak in-flight and the TP shares. */
export function rq1Table(rows: readonly Row[]): string {
  return formatTable(
    [
      'profile',
      'TP',
      'PP',
      'limit',
      'policy',
      'ms',
      'speedup vs 1f1b',
      'peak',
      '1f1b peak',
      'TP peer wait',
      'TP coord',
    ],
    rows.map((r) => [
      String(r.profile),
      String(r.tp),
      String(r.stages),
      String(r.buffer_limit),
      String(r.policy),
      range(of(r, 'makespan_ms'), (x) => x.toFixed(1)),
      range(of(r, 'speedup_vs_1f1b'), (x) => `${x.toFixed(2)}x`),
      String(of(r, 'peak_inflight').max),
      String(of(r, 'peak_inflight_1f1b').max),
      range(of(r, 'tp_peer_wait_share'), pct),
      range(of(r, 'tp_coordination_share'), pct),
    ]),
  );
}
