import { strict as assert } from 'assert';
import { resolveConfig } from '../job/config';
import { RealClock } from '../base/clock';
import { StageCompute } from '../stage/compute';
import { runJob } from '../job/run-local';
import { validateRun } from '../checks/validate';
import { Task, formatTask } from '../policies/task';
import { Bus, BusHandler, Subscription } from '../transport/bus';
import { NatsBus } from '../transport/nats-bus';
import { natsServerForSuite } from './nats-server-fixture';

/** A NatsBus that also records, per publish, which stage sent it and whether a completed written() covers it. */
class RecordingBus implements Bus {
  readonly kind = 'nats';
  private readonly sentBy: number[] = [];
  private writtenUpTo = 0;
  constructor(private readonly inner: NatsBus) {}
  get maxMessageBytes(): number {
    return this.inner.maxMessageBytes;
  }

  publish(subject: string, data: Uint8Array): void {
    // Activations go to stage 1 (sent by stage 0), gradients to stage 0 (sent by stage 1).
    const m = /\.(activation|gradient)\.(\d+)$/.exec(subject);
    this.sentBy.push(m ? (m[1] === 'activation' ? Number(m[2]) - 1 : Number(m[2]) + 1) : -1);
    this.inner.publish(subject, data);
  }

  subscribe(subject: string, handler: BusHandler): Subscription {
    return this.inner.subscribe(subject, handler);
  }

  flush(): Promise<void> {
    return this.inner.flush();
  }

  async written(): Promise<void> {
    const upTo = this.sentBy.length;
    await this.inner.written();
    this.writtenUpTo = Math.max(this.writtenUpTo, upTo);
  }

  /** Messages of `stage` that were published and then covered by a completed written(). */
  writtenFrom(stage: number): number {
    return this.sentBy.slice(0, this.writtenUpTo).filter((s) => s === stage).length;
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

/**
 * Compute that holds the thread for `ms` per task, as tfjs compute does, and checks at
 * each start that the messages of its stage's earlier tasks have left the process.
 */
class BusyCompute implements StageCompute {
  readonly kind = 'busy';
  readonly blocking = true;
  readonly violations: string[] = [];
  runs = 0;
  private sending = 0;
  constructor(
    private readonly stage: number,
    private readonly bus: RecordingBus,
    private readonly ms: number,
  ) {}

  run(_iteration: number, t: Task, done: () => void): void {
    const written = this.bus.writtenFrom(this.stage);
    if (written < this.sending)
      this.violations.push(
        `${formatTask(t)} on stage ${this.stage} started with ${this.sending - written} earlier output(s) not yet written out`,
      );
    // Stage 0's forwards send activations; stage 1 (the loss stage) sends gradients from its backwards.
    if ((this.stage === 0) === (t.kind === 'F')) this.sending++;
    this.runs++;
    const until = performance.now() + this.ms;
    while (performance.now() < until) {
      /* holds the event loop like a real compute task */
    }
    done();
  }
}

describe('a blocking compute task', function () {
  this.timeout(60_000);
  const server = natsServerForSuite();

  it('starts only after the messages its stage produced before it have been written out of the process', async () => {
    const bus = new RecordingBus(await NatsBus.connect(server().url));
    const computes: BusyCompute[] = [];
    try {
      const cfg = resolveConfig({
        job: 'blocking',
        stages: 2,
        microbatches: 6,
        policy: 'bf',
        profile: 'uniform',
        jitter: 'none',
      });
      const r = await runJob(cfg, {
        clock: 'real',
        bus,
        computeFor: (stage, clock) => {
          assert.ok(clock instanceof RealClock);
          const c = new BusyCompute(stage, bus, 3);
          computes.push(c);
          return c;
        },
      });
      assert.deepEqual(validateRun(r.events, r.shape, 1), []);
      assert.equal(
        computes.reduce((n, c) => n + c.runs, 0),
        2 * 2 * 6,
        'every F and B ran',
      );
      assert.deepEqual(
        computes.flatMap((c) => c.violations),
        [],
      );
    } finally {
      await bus.close();
    }
  });
});
