// A launcher's view of a distributed job's events: the node agents' trace batches on
// baton.<job>.trace.<stage>, checked event by event, kept in arrival order and counted per
// stage (the agents' finish answers say how many to expect).
// The wildcard's last token is whatever a publisher chose: quoted wherever it is printed.
// Only a batch that carries this launch's id and is malformed fails the run (its trace
// would be incomplete); whatever else a peer puts on the subjects is counted and left out.

import { quoteValue } from '../base/quote';
import { RejectTally, newRejectTally, tallyReject } from '../base/reject-tally';
import { Bus, Subscription } from '../transport/bus';
import { decodeValue } from '../transport/codec';
import { BatonEvent, EventSink, endsWork, eventProblem } from '../stage/events';

export class TraceCollector {
  readonly events: BatonEvent[] = [];
  readonly received = new Map<number, number>();
  /** Tasks and iterations that ended (endsWork): the job's progress. */
  workDone = 0;
  /** Malformed batches of this launch: they fail the run. */
  readonly rejects = newRejectTally();

  constructor(
    private readonly job: string,
    private readonly launch: string,
    private readonly stages: number,
    private readonly sinks: readonly EventSink[],
    /** Where what is not a trace batch of this launch is counted. */
    private readonly others: RejectTally,
  ) {}

  subscribe(bus: Bus): Subscription {
    return bus.subscribe(`baton.${this.job}.trace.*`, (subj, d) => this.onBatch(subj, d));
  }

  private onBatch(subj: string, d: Uint8Array): void {
    const where = quoteValue(subj, 200);
    const v = this.batchOf(where, d);
    if (v === null) return;
    try {
      if (!Array.isArray(v.events)) throw new Error('trace batch without an events list');
      const stage = subj.slice(subj.lastIndexOf('.') + 1);
      if (!/^(0|[1-9][0-9]*)$/.test(stage) || Number(stage) >= this.stages)
        throw new Error(`trace subject of no stage of this job (0..${this.stages - 1})`);
      v.events.forEach((x, i) => this.take(where, stage, x, i));
    } catch (err) {
      tallyReject(this.rejects, `${where}: ${(err as Error).message}`);
    }
  }

  /** The batch, if it is a map of this launch; anything else is counted with the others. */
  private batchOf(where: string, d: Uint8Array): { events?: unknown[]; launch?: unknown } | null {
    let v: { events?: unknown[]; launch?: unknown };
    try {
      const x = decodeValue(d);
      if (typeof x !== 'object' || x === null || Array.isArray(x)) {
        tallyReject(this.others, `${where}: not a trace batch (a map with this run's launch id), got ${quoteValue(x)}`);
        return null;
      }
      v = x as typeof v;
    } catch (err) {
      tallyReject(this.others, `${where}: not a trace batch: ${(err as Error).message}`);
      return null;
    }
    if (v.launch !== this.launch) {
      tallyReject(
        this.others,
        `${where}: trace batch of launch ${quoteValue(v.launch)}, this is launch ${this.launch}: left by an earlier run of the same job name, or by an attempt a replay replaced?`,
      );
      return null;
    }
    return v;
  }

  private take(where: string, stage: string, x: unknown, i: number): void {
    const problem =
      eventProblem(x) ??
      (String((x as BatonEvent).stage) !== stage
        ? `an event of stage ${(x as BatonEvent).stage} on stage ${stage}'s subject`
        : null);
    if (problem) {
      tallyReject(this.rejects, `${where}: event ${i}: ${problem}`);
      return;
    }
    const e = x as BatonEvent;
    this.events.push(e);
    if (endsWork(e)) this.workDone++;
    this.received.set(e.stage, (this.received.get(e.stage) ?? 0) + 1);
    for (const s of this.sinks) s(e);
  }
}
