import { strict as assert } from 'assert';
import { resolveConfig, JobConfig } from '../job/config';
import { BatonEvent } from '../stage/events';
import { runJob } from '../job/run-local';
import { toChromeTrace } from '../cli/trace/chrome';
import { batonEventsFromTrace } from '../cli/trace/chrome-read';

const run = async (c: Partial<JobConfig>) =>
  (await runJob(resolveConfig({ stages: 4, microbatches: 8, jitter: 'paper', ...c }), { clock: 'virtual' })).events;
const of = (events: readonly BatonEvent[], type: BatonEvent['type']) => events.filter((e) => e.type === type);

describe('Baton events read back from a Chrome trace', () => {
  let ofb: BatonEvent[];
  before(async () => {
    ofb = await run({ policy: '1f1b', chunks: 1, seed: 3 });
  });

  it('rebuilds tasks, waits and messages from the complete events when the embedded copy is gone', () => {
    const trace = toChromeTrace(ofb, { job: 'j', stages: 4 });
    const { baton_events: _dropped, ...rest } = trace.metadata;
    const rebuilt = batonEventsFromTrace({ traceEvents: trace.traceEvents, metadata: rest });
    assert.equal(of(rebuilt, 'task-start').length, of(ofb, 'task-start').length);
    assert.equal(of(rebuilt, 'send').length, of(ofb, 'send').length);
    const busy = (ev: BatonEvent[]) => {
      const s = ev.filter((e) => e.type === 'task-start').reduce((a, e) => a + e.t, 0);
      return ev.filter((e) => e.type === 'task-end').reduce((a, e) => a + e.t, 0) - s;
    };
    assert.ok(Math.abs(busy(rebuilt) - busy(ofb)) < 1e-3);
  });

  it('reads tasks, waits and messages back by process and thread names, in this numbering and the earlier one', () => {
    const trace = toChromeTrace(ofb, { job: 'j', stages: 4 });
    // Written before: stage s as pid s, threads 0 compute, 1 comm, 2 waits.
    const earlier = trace.traceEvents.map((e) => ({ ...e, pid: e.pid - 1, tid: e.tid - 1 }));
    for (const traceEvents of [trace.traceEvents, earlier]) {
      const back = batonEventsFromTrace({ traceEvents });
      for (const type of ['task-start', 'wait', 'send', 'receive'] as const)
        assert.deepEqual(
          of(back, type)
            .map((e) => e.stage)
            .sort(),
          of(ofb, type)
            .filter((e) => type !== 'receive' || (e as { src: number }).src >= 0)
            .map((e) => e.stage)
            .sort(),
          type,
        );
    }
  });
});
