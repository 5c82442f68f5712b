// A node agent's trace publishing: the events of the stages it hosts for one job go out
// on baton.<job>.trace.<stage> in batches (at most TRACE_BATCH events, at most
// TRACE_FLUSH_MS old), so a watcher or the job's launcher sees every task and message.

import { Bus } from '../transport/bus';
import { encodeValue } from '../transport/codec';
import { launchField } from '../transport/envelope';
import { PayloadTooLargeError } from '../transport/nats-bus';
import { subject } from '../transport/subjects';
import { BatonEvent } from '../stage/events';

const TRACE_BATCH = 256;
const TRACE_FLUSH_MS = 50;

export class TraceBatcher {
  private readonly pending = new Map<number, BatonEvent[]>();
  /** Events published, per stage (the finish answer reports them). */
  readonly sent = new Map<number, number>();
  /** Trace batches that could not be published (the finish answer reports them). */
  readonly lost: string[] = [];
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly bus: Bus,
    private readonly job: string,
    private readonly launch: string | undefined,
    private readonly log: (line: string) => void,
  ) {}

  /** Start batching `stage`'s events (events of other stages are ignored). */
  addStage(stage: number): void {
    this.pending.set(stage, []);
    this.sent.set(stage, 0);
  }

  record(e: BatonEvent): void {
    const list = this.pending.get(e.stage);
    if (!list) return;
    list.push(e);
    if (list.length >= TRACE_BATCH) this.flush();
    else if (!this.timer) this.timer = setTimeout(() => this.flush(), TRACE_FLUSH_MS);
  }

  flush(): void {
    this.stop();
    for (const [stage, list] of this.pending) {
      if (list.length === 0) continue;
      this.pending.set(stage, []);
      this.publish(stage, list);
    }
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  /** A batch over the server's max_payload goes out in halves; an event that alone is over
   * it is dropped, logged and reported in the answer to finish. */
  private publish(stage: number, list: BatonEvent[]): void {
    try {
      this.bus.publish(subject(this.job, 'trace', stage), encodeValue({ events: list, ...launchField(this.launch) }));
      this.sent.set(stage, (this.sent.get(stage) ?? 0) + list.length);
    } catch (err) {
      if (err instanceof PayloadTooLargeError && list.length > 1) {
        const half = list.length >> 1;
        this.publish(stage, list.slice(0, half));
        this.publish(stage, list.slice(half));
        return;
      }
      const lost = `${list.length} trace event(s) of stage ${stage} lost: ${(err as Error).message}`;
      this.lost.push(lost);
      this.log(`job ${this.job}: ${lost}`);
    }
  }
}
