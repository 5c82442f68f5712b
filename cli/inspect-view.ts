// What `baton inspect` shows, as a pure function of the messages it has seen: the
// stages' periodic stats (actors/stats-publisher.ts) and the coordinator's reports (the
// iteration and, when training, the loss). Rates are the difference of two stats
// messages over the time between them. Anything malformed is counted, never shown.

import { decodeEnvelope, decodeValue } from '../transport/codec';
import { parseSubject } from '../transport/subjects';
import { StageStats } from '../actors/stats-publisher';
import { printable } from './table';

interface Seen {
  last: StageStats;
  at: number;
  rates: { tasks: number; msgs: number; bytes: number; blocked: number } | null;
}

export interface InspectState {
  readonly job: string;
  readonly stages: Map<number, Seen>;
  iteration: number | null;
  loss: number | null;
  malformed: number;
}

export function newInspectState(job: string): InspectState {
  return { job, stages: new Map(), iteration: null, loss: null, malformed: 0 };
}

const isCount = (x: unknown) => Number.isSafeInteger(x) && (x as number) >= 0;
const isNum = (x: unknown) => typeof x === 'number' && Number.isFinite(x) && x >= 0;
const isTasks = (x: unknown) =>
  Array.isArray(x) && x.length <= 64 && x.every((t) => typeof t === 'string' && t.length < 16);

function statsProblem(v: Record<string, unknown>, job: string): string | null {
  if (v.v !== 1 || v.job !== job) return 'not a stats message of this job';
  for (const k of ['stage', 'inflight', 'limit', 'tasks', 'sent', 'sentBytes', 'received', 'receivedBytes', 'rejected'])
    if (!isCount(v[k])) return `field ${k}`;
  if (!isNum(v.upMs) || !isNum(v.blockedMs)) return 'upMs or blockedMs';
  if (v.iteration !== null && !Number.isSafeInteger(v.iteration)) return 'iteration';
  if (v.running !== null && typeof v.running !== 'string') return 'running';
  if (typeof v.policy !== 'string') return 'policy';
  const r = v.ready as Record<string, unknown> | null;
  if (!r || typeof r !== 'object' || !isTasks(r.F) || !isTasks(r.B) || !isTasks(r.W)) return 'ready';
  return null;
}

/** Take one message of the job's subjects (baton.<job>.>) seen at `now` (ms). Never throws. */
export function takeMessage(s: InspectState, subj: string, data: Uint8Array, now: number): void {
  const kind = parseSubject(subj)?.kind;
  try {
    if (kind === 'stats') {
      const v = decodeValue(data, { maxBytes: 64 * 1024 }) as Record<string, unknown>;
      if (typeof v !== 'object' || v === null || statsProblem(v, s.job) !== null) {
        s.malformed++;
        return;
      }
      const st = v as unknown as StageStats;
      const prev = s.stages.get(st.stage);
      const dt = prev ? (st.upMs - prev.last.upMs) / 1000 : 0;
      const rates =
        prev && dt > 0
          ? {
              tasks: (st.tasks - prev.last.tasks) / dt,
              msgs: (st.sent + st.received - prev.last.sent - prev.last.received) / dt,
              bytes: (st.sentBytes + st.receivedBytes - prev.last.sentBytes - prev.last.receivedBytes) / dt,
              blocked: (st.blockedMs - prev.last.blockedMs) / (dt * 1000),
            }
          : (prev?.rates ?? null);
      s.stages.set(st.stage, { last: st, at: now, rates });
    } else if (kind === 'report') {
      const e = decodeEnvelope(data);
      if (e.job !== s.job || e.kind !== 'report') return;
      s.iteration = Math.max(s.iteration ?? -1, e.iteration);
      const loss = e.body?.loss;
      if (typeof loss === 'number' && Number.isFinite(loss)) s.loss = loss;
    }
  } catch {
    s.malformed++;
  }
}

const fixed = (x: number | undefined, d = 0) => (x === undefined ? '-' : x.toFixed(d));
const bytesRate = (b: number | undefined) =>
  b === undefined ? '-' : b >= 1e6 ? `${(b / 1e6).toFixed(1)}M` : b >= 1e3 ? `${(b / 1e3).toFixed(1)}k` : b.toFixed(0);
const list = (xs: readonly string[], n = 4) =>
  xs.length === 0 ? '-' : xs.length <= n ? xs.join(' ') : `${xs.slice(0, n).join(' ')} +${xs.length - n}`;

const HEADER = [
  'stage',
  'policy',
  'iter',
  'running',
  'ready (F | B | W)',
  'buffer',
  'tasks/s',
  'msgs/s',
  'B/s',
  'blocked',
  'state',
];

/** The screen: a job line, then one row per stage seen (stale ones marked). */
export function render(s: InspectState, now: number): string[] {
  const stage0 = s.stages.get(0)?.last;
  const elapsed = stage0 ? `${(stage0.upMs / 1000).toFixed(1)} s` : '-';
  // The stages' own iteration (the reports' trails them by the one in progress).
  const iteration = Math.max(s.iteration ?? -1, ...[...s.stages.values()].map((x) => x.last.iteration ?? -1));
  const head =
    `job ${printable(s.job)}  iteration ${iteration >= 0 ? iteration : '-'}  elapsed ${elapsed}` +
    (s.loss !== null ? `  loss ${s.loss.toFixed(4)}` : '') +
    `  stages ${s.stages.size}` +
    (s.malformed > 0 ? `  ignored ${s.malformed} malformed` : '');
  const rows = [...s.stages.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([stage, x]) => {
      const l = x.last;
      const r = x.rates ?? undefined;
      return [
        String(stage),
        printable(l.policy) + (l.swapsPending > 0 ? ` (+${l.swapsPending})` : ''),
        l.iteration === null ? '-' : String(l.iteration),
        l.running ?? 'idle',
        `${list(l.ready.F)} | ${list(l.ready.B)} | ${list(l.ready.W)}`,
        `${l.inflight}/${l.limit}`,
        fixed(r?.tasks, 1),
        fixed(r?.msgs, 1),
        bytesRate(r?.bytes),
        r ? `${Math.min(100, r.blocked * 100).toFixed(0)}%` : '-',
        now - x.at > 2000 ? `stale ${((now - x.at) / 1000).toFixed(0)} s` : 'live',
      ];
    });
  const widths = HEADER.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i]))
      .join('  ')
      .trimEnd();
  return [head, line(HEADER), ...rows.map(line)];
}
