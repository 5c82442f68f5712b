import { strict as assert } from 'assert';
import { CoordinatedJob, coordinate } from '../actors/coordinator';
import { RealClock } from '../base/clock';
import { ActorRuntime } from '../actors/runtime';
import { decodeEnvelope } from '../transport/codec';
import { LocalBus } from '../transport/local-bus';
import { subject } from '../transport/subjects';
import { reportEnvelope } from './helpers-envelope';

/** A LocalBus that also logs when someone waits for its publishes to be written out. */
class WrittenLoggingBus extends LocalBus {
  constructor(private readonly log: string[]) {
    super();
  }
  override async written(): Promise<void> {
    this.log.push('written');
  }
}

/**
 * Begins a coordinator of `wiring.job` on `bus` (its actors in a runtime named `name`), runs `body`
 * on it, then ends what the test started: the coordinator's subscriptions, the actors, the bus.
 */
async function coordinated(
  name: string,
  bus: LocalBus,
  wiring: Omit<Parameters<typeof coordinate>[0], 'runtime' | 'bus'>,
  body: (c: CoordinatedJob) => Promise<void>,
): Promise<void> {
  const runtime = new ActorRuntime(new RealClock(), name);
  const c = coordinate({ runtime, bus, ...wiring });
  try {
    c.begin();
    await body(c);
  } finally {
    c.unsubscribe();
    runtime.shutdown();
    await bus.close();
  }
}

describe('coordinator', () => {
  it('sends stage 0 its start and first microbatch before encoding the rest of an iteration', async () => {
    const log: string[] = [];
    const bus = new WrittenLoggingBus(log);
    const job = 'coordorder';
    const stages = 3;
    const microbatches = 4;
    bus.subscribe(`baton.${job}.control.*`, (_s, d) => {
      const e = decodeEnvelope(d);
      log.push(`control ${e.dst} it${e.iteration}`);
    });
    bus.subscribe(`baton.${job}.data.*`, (_s, d) => {
      const e = decodeEnvelope(d);
      log.push(`data ${e.mb} it${e.iteration}`);
    });
    const report = (iteration: number, src: number): void =>
      bus.publish(subject(job, 'report'), reportEnvelope(job, src, { peakInflight: 0 }, { iteration }));
    const startOf = (iteration: number): string[] => [
      `control 0 it${iteration}`,
      `data 0 it${iteration}`,
      'written',
      `control 1 it${iteration}`,
      `control 2 it${iteration}`,
      `data 1 it${iteration}`,
      `data 2 it${iteration}`,
      `data 3 it${iteration}`,
    ];
    const settle = async (): Promise<void> => {
      for (let i = 0; i < 100; i++) await new Promise((r) => setImmediate(r));
    };
    await coordinated('coord-test', bus, { job, stages, microbatches, iterations: 2 }, async (c) => {
      await settle();
      assert.deepEqual(log, startOf(0));
      log.length = 0;
      for (let s = 0; s < stages; s++) report(0, s);
      await settle();
      assert.deepEqual(log, startOf(1));
      for (let s = 0; s < stages; s++) report(1, s);
      const records = await c.done;
      assert.deepEqual(
        records.map((r) => r.iteration),
        [0, 1],
      );
      assert.deepEqual(c.rejects, { count: 0, first: [] });
    });
  });

  it('stamps its launch on what it sends and refuses reports of another launch or of none', async () => {
    const bus = new LocalBus();
    const job = 'coordlaunch';
    const launches: (string | undefined)[] = [];
    bus.subscribe(`baton.${job}.>`, (subj, d) => {
      if (!subj.endsWith('.report')) launches.push(decodeEnvelope(d).launch);
    });
    const report = (src: number, launch?: string): void =>
      bus.publish(subject(job, 'report'), reportEnvelope(job, src, { peakInflight: 0 }, { launch }));
    const wiring = { job, stages: 2, microbatches: 2, iterations: 1, launch: 'abc123' };
    await coordinated('coord-launch', bus, wiring, async (c) => {
      report(0, 'zzz999');
      report(1);
      report(0, 'abc123');
      report(1, 'abc123');
      const records = await c.done;
      assert.equal(records.length, 1);
      assert.deepEqual(
        launches,
        ['abc123', 'abc123', 'abc123', 'abc123'],
        'two starts and two microbatches, each stamped',
      );
      assert.equal(c.rejects.count, 2);
      assert.match(c.rejects.first[0], /report of launch zzz999 from stage 0, this is launch abc123/);
      assert.match(c.rejects.first[1], /report of launch \(none\) from stage 1/);
    });
  });

  it("refuses, counted, a report whose body the launcher cannot read, and still takes the stage's own after it", async () => {
    const bus = new LocalBus();
    const job = 'coordbody';
    const report = (src: number, body: Record<string, unknown>): void =>
      bus.publish(subject(job, 'report'), reportEnvelope(job, src, body));
    const store = {
      updates: 2,
      inflightBound: 2,
      delay: 1,
      staleness: { mean: 0.5, max: 1, count: 2 },
      stalenessByUpdate: [0, 1],
      extraStateBytes: 0,
      optimizerBytes: 64,
      consistency: 'fresco',
    };
    const wiring = { job, stages: 2, microbatches: 2, iterations: 1, reportFields: () => ['store'] };
    await coordinated('coord-body', bus, wiring, async (c) => {
      report(1, { peakInflight: 1, store: {} });
      report(1, { peakInflight: 1 });
      report(0, { peakInflight: -1, store });
      report(0, { peakInflight: 2, store });
      report(1, { peakInflight: 1, store });
      const records = await c.done;
      assert.deepEqual(records[0].reports, [
        { peakInflight: 2, store },
        { peakInflight: 1, store },
      ]);
      assert.equal(c.rejects.count, 3);
      assert.match(
        c.rejects.first[0],
        /report from stage 1 for iteration 0: the report's store is not a map whose updates is a whole number ≥ 0/,
      );
      assert.match(c.rejects.first[1], /report from stage 1 for iteration 0: the report has no store/);
      assert.match(
        c.rejects.first[2],
        /report from stage 0 for iteration 0: the report's peakInflight is not a whole number ≥ 0/,
      );
    });
  });
});
