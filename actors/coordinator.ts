// The job coordinator: starts each iteration (a control message to every stage, then
// the data of all M microbatches to stage 0), collects the stages' end-of-iteration
// reports, and starts the next iteration once every stage has reported (the flush of
// synchronous training). It measures each iteration's makespan on its own clock.

import { decodeEnvelope } from '../transport/codec';
import { quoteValue } from '../base/quote';
import { Bus } from '../transport/bus';
import { ENVELOPE_VERSION, Envelope, launchField, launchText } from '../transport/envelope';
import { encodeEnvelope } from '../transport/codec';
import { subject } from '../transport/subjects';
import { Lane, laneIndex, laneSubject, lanesOf } from '../transport/lanes';
import { ActorRef, ActorRuntime } from './runtime';
import { RejectTally, newRejectTally, tallyReject } from '../base/reject-tally';
import { reportBodyProblem } from '../checks/report-body';
import { IterationRecord } from '../checks/stats';

export { IterationRecord };

export type CoordinatorMsg =
  { readonly type: 'begin' } | { readonly type: 'bytes'; readonly subject: string; readonly data: Uint8Array };

export interface CoordinatorWiring {
  readonly runtime: ActorRuntime;
  readonly bus: Bus;
  readonly job: string;
  readonly stages: number;
  readonly microbatches: number;
  readonly iterations: number;
  /** Number of the first iteration (default 0). */
  readonly firstIteration?: number;
  /** Data payload per microbatch (real compute); emulated runs send only the signal. */
  readonly dataBytes?: number;
  readonly onIteration?: (r: IterationRecord) => void;
  readonly onDone: (records: IterationRecord[]) => void;
  readonly onReject?: (detail: string) => void;
  /** The job's launch id: stamped on what the coordinator sends, required of the reports it takes. */
  readonly launch?: string;
  /** The fields each stage's report must carry besides peakInflight (requiredReportFields). */
  readonly reportFields?: (stage: number) => readonly string[];
  /** T tensor-parallel ranks per stage and D replicas (default 1 and 1): every stage actor of every lane reports. */
  readonly ranks?: number;
  readonly replicas?: number;
}

const lanesOfJob = (w: CoordinatorWiring): Lane[] => lanesOf(w.ranks ?? 1, w.replicas ?? 1);

interface CoordinatorState {
  iteration: number;
  start: number;
  seq: number;
  reports: (Record<string, unknown> | null)[];
  records: IterationRecord[];
  finished: boolean;
}

/** Start `s.iteration`: its start message to every stage, and the data of every microbatch to stage 0. */
async function beginIteration(w: CoordinatorWiring, s: CoordinatorState): Promise<void> {
  const { bus, job, stages, microbatches } = w;
  s.start = w.runtime.clock.now();
  const lanes = lanesOfJob(w);
  s.reports = new Array(stages * lanes.length).fill(null);
  const base = {
    v: ENVELOPE_VERSION,
    job,
    iteration: s.iteration,
    src: -1,
    sentAt: s.start,
    tensors: [],
    ...launchField(w.launch),
  };
  const control = (st: number, lane: Lane): void =>
    bus.publish(
      laneSubject(job, 'control', st, lane),
      encodeEnvelope({
        ...base,
        kind: 'control',
        mb: -1,
        chunk: -1,
        dir: 'control',
        dst: st,
        seq: s.seq++,
        bytes: 0,
        body: { verb: 'start' },
      }),
    );
  const data = (mb: number, lane: Lane): void =>
    bus.publish(
      laneSubject(job, 'data', 0, lane),
      encodeEnvelope({
        ...base,
        kind: 'data',
        mb,
        chunk: 0,
        dir: 'forward',
        dst: 0,
        seq: s.seq++,
        bytes: w.dataBytes ?? 0,
      }),
    );
  // Stage 0 can start on its start message and the first microbatch: send those on
  // their own, before encoding the rest (the other stages need theirs only later).
  for (const lane of lanes) {
    control(0, lane);
    data(0, lane);
  }
  await bus.written();
  for (const lane of lanes) for (let st = 1; st < stages; st++) control(st, lane);
  for (const lane of lanes) for (let mb = 1; mb < microbatches; mb++) data(mb, lane);
}

/** The report `msg` carries, with its stage, if it is one the coordinator takes now; else null, the refusal told. */
function acceptedReport(
  w: CoordinatorWiring,
  s: CoordinatorState,
  msg: { readonly subject: string; readonly data: Uint8Array },
): { slot: number; body: Record<string, unknown> } | null {
  const { job, stages } = w;
  let e: Envelope;
  try {
    e = decodeEnvelope(msg.data);
  } catch (err) {
    w.onReject?.(`${msg.subject}: ${(err as Error).message}`);
    return null;
  }
  if (e.kind !== 'report' || e.job !== job || !Number.isInteger(e.src) || e.src < 0 || e.src >= stages) {
    w.onReject?.(`${msg.subject}: not a report of this job (kind ${quoteValue(e.kind)}, job ${e.job}, stage ${e.src})`);
    return null;
  }
  if (w.launch !== undefined && e.launch !== w.launch) {
    w.onReject?.(
      `${msg.subject}: report of launch ${launchText(e.launch)} from stage ${e.src}, this is launch ${w.launch}: left by an earlier run of the same job name, or by an attempt a replay replaced?`,
    );
    return null;
  }
  if (s.finished || e.iteration !== s.iteration) {
    w.onReject?.(
      `${msg.subject}: report for iteration ${e.iteration} from stage ${e.src} while at iteration ${s.iteration}`,
    );
    return null;
  }
  const body = { ...(e.body ?? {}) };
  const ranks = w.ranks ?? 1;
  const { rank = 0, replica = 0 } = body as { rank?: unknown; replica?: unknown };
  if (
    !Number.isInteger(rank) ||
    !Number.isInteger(replica) ||
    (rank as number) < 0 ||
    (rank as number) >= ranks ||
    (replica as number) < 0 ||
    (replica as number) >= (w.replicas ?? 1)
  ) {
    w.onReject?.(
      `${msg.subject}: report from stage ${e.src} names rank ${quoteValue(rank)}, replica ${quoteValue(replica)}, not one of this job's`,
    );
    return null;
  }
  const slot = laneIndex({ rank: rank as number, replica: replica as number, ranks }) * stages + e.src;
  if (s.reports[slot] !== null) {
    w.onReject?.(`${msg.subject}: duplicate report from stage ${e.src} for iteration ${e.iteration}`);
    return null;
  }
  const problem = reportBodyProblem(body, w.reportFields?.(e.src) ?? []);
  if (problem) {
    w.onReject?.(`${msg.subject}: report from stage ${e.src} for iteration ${e.iteration}: ${problem}`);
    return null;
  }
  return { slot, body };
}

/** Every stage has reported: record the iteration, then begin the next or finish. */
async function endIteration(w: CoordinatorWiring, s: CoordinatorState, first: number): Promise<void> {
  const end = w.runtime.clock.now();
  const rec: IterationRecord = {
    iteration: s.iteration,
    start: s.start,
    end,
    makespan: end - s.start,
    reports: s.reports as Record<string, unknown>[],
  };
  s.records.push(rec);
  w.onIteration?.(rec);
  s.iteration++;
  if (s.iteration < first + w.iterations) await beginIteration(w, s);
  else {
    s.finished = true;
    w.onDone(s.records);
  }
}

export function spawnCoordinator(w: CoordinatorWiring): ActorRef<CoordinatorMsg> {
  const first = w.firstIteration ?? 0;
  const initial: CoordinatorState = { iteration: first, start: 0, seq: 0, reports: [], records: [], finished: false };
  return w.runtime.spawn<CoordinatorState, CoordinatorMsg>('coordinator', initial, async (s, msg) => {
    if (msg.type === 'begin') {
      await beginIteration(w, s);
      return s;
    }
    const report = acceptedReport(w, s, msg);
    if (report === null) return s;
    s.reports[report.slot] = report.body;
    if (s.reports.every((r) => r !== null)) await endIteration(w, s, first);
    return s;
  });
}

export interface CoordinatedJob {
  /** Resolves with the iteration records once every iteration has ended. */
  readonly done: Promise<IterationRecord[]>;
  /** Messages the coordinator refused (stray or malformed reports): how many, and the first ones. */
  readonly rejects: RejectTally;
  readonly unsubscribe: () => void;
  begin(): void;
}

/** A coordinator for one job, listening to the job's report subject. */
export function coordinate(w: Omit<CoordinatorWiring, 'onDone' | 'onReject'>): CoordinatedJob {
  const rejects = newRejectTally();
  let finish: (r: IterationRecord[]) => void = () => {};
  const done = new Promise<IterationRecord[]>((resolve) => (finish = resolve));
  const actor = spawnCoordinator({ ...w, onDone: finish, onReject: (d) => tallyReject(rejects, d) });
  const sub = w.bus.subscribe(subject(w.job, 'report'), (subj, data) =>
    w.runtime.send(actor, { type: 'bytes', subject: subj, data }),
  );
  return { done, rejects, unsubscribe: () => sub.unsubscribe(), begin: () => w.runtime.send(actor, { type: 'begin' }) };
}
