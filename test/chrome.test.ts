import { strict as assert } from 'assert';
import { resolveConfig, JobConfig } from '../job/config';
import { BatonEvent } from '../stage/events';
import { runJob } from '../job/run-local';
import { writeTraceFiles } from '../cli/trace-output';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { ChromeEvent, TID, commTid, stagePid, toChromeTrace } from '../cli/trace/chrome';
import { checkChromeTrace } from '../cli/trace/chrome-check';
import { batonEventsFromTrace } from '../cli/trace/chrome-read';
import { forwardEnd, forwardStart } from './helpers-events';
import { oneLayerProfile } from './helpers-profile';

const run = async (c: Partial<JobConfig>) =>
  (await runJob(resolveConfig({ stages: 4, microbatches: 8, jitter: 'paper', ...c }), { clock: 'virtual' })).events;
const of = (events: readonly BatonEvent[], type: BatonEvent['type']) => events.filter((e) => e.type === type);
/** Perfetto's time for a trace timestamp in microseconds: integer nanoseconds. */
const perfettoNs = (us: number) => Math.round(us * 1000);

interface Slice {
  name: string;
  start: number;
  end: number;
}

/**
 * Reads the complete and thread-instant events of each thread as Perfetto's slice stack
 * does (sorted by ts, file order for ties): a slice is closed once the next one starts
 * at or after its end (zero-length ones at one time stack), and one that starts inside
 * an open slice but ends after it is dropped. Calls `visit` with each event and the
 * slice stack of its thread; returns the names of the dropped slices.
 */
function perfettoStacks(
  events: readonly ChromeEvent[],
  visit: (e: ChromeEvent, stack: Slice[]) => void = () => {},
): string[] {
  const stacks = new Map<string, Slice[]>();
  const dropped: string[] = [];
  for (const e of [...events].filter((x) => x.ph !== 'M').sort((a, b) => a.ts - b.ts)) {
    const key = `${e.pid}|${e.tid}`;
    const stack = stacks.get(key) ?? [];
    stacks.set(key, stack);
    if (e.ph === 'X' || (e.ph === 'i' && e.s === 't')) {
      const start = perfettoNs(e.ts);
      const end = start + perfettoNs(e.dur ?? 0);
      while (stack.length > 0) {
        const top = stack[stack.length - 1];
        if (top.end < start || (top.end === start && !(top.start === top.end && start === end))) stack.pop();
        else break;
      }
      const top = stack[stack.length - 1];
      if (top && start < top.end && end > top.end) {
        dropped.push(`${e.name} (pid ${e.pid}, tid ${e.tid}) overlaps ${top.name}`);
        continue;
      }
      stack.push({ name: e.name, start, end });
    }
    visit(e, stack);
  }
  return dropped;
}

const perfettoDrops = (events: readonly ChromeEvent[]) => perfettoStacks(events);

/** For each flow start and end, whether the slice it binds to (the innermost open one on its thread) is its message's. */
function flowBindings(events: readonly ChromeEvent[]): { flow: string; ok: boolean }[] {
  const out: { flow: string; ok: boolean }[] = [];
  perfettoStacks(events, (e, stack) => {
    if (e.ph !== 's' && e.ph !== 'f') return;
    const top = stack[stack.length - 1]?.name;
    out.push({ flow: `${e.ph} ${e.name} bound to ${top}`, ok: top === (e.ph === 's' ? e.name : `arrive ${e.name}`) });
  });
  return out;
}

describe('Chrome trace of a Baton run', () => {
  let bf: BatonEvent[];
  let ofb: BatonEvent[];
  before(async () => {
    bf = await run({ policy: 'bf', iterations: 2 });
    ofb = await run({ policy: '1f1b', chunks: 1, seed: 3 });
  });

  it('passes the schema check for bf and 1f1b runs', () => {
    for (const events of [bf, ofb])
      assert.deepEqual(checkChromeTrace(toChromeTrace(events, { job: 'j', stages: 4 })), []);
  });

  it('survives a JSON round trip unchanged and still valid', () => {
    const trace = toChromeTrace(bf, { job: 'j', stages: 4, config: { policy: 'bf' } });
    const back = JSON.parse(JSON.stringify(trace));
    assert.deepEqual(back, trace);
    assert.deepEqual(checkChromeTrace(back), []);
  });

  it('holds exactly one compute-track complete event per executed task, with its duration', () => {
    const trace = toChromeTrace(bf, { job: 'j', stages: 4 });
    const compute = trace.traceEvents.filter((e) => e.ph === 'X' && e.tid === TID.compute);
    const starts = of(bf, 'task-start');
    assert.equal(compute.length, starts.length);
    assert.equal(compute.length, 2 * 4 * 8 * 2);
    const names = new Set(compute.map((e) => `${e.pid}|${(e.args as { iteration: number }).iteration}|${e.name}`));
    assert.equal(names.size, compute.length, 'no task appears twice');
    const origin = Math.min(...bf.map((e) => e.t));
    const end = bf.find(
      (e) => e.type === 'task-end' && e.stage === 2 && e.mb === 5 && e.kind === 'B' && e.iteration === 1,
    ) as BatonEvent;
    const box = compute.find(
      (e) => e.pid === stagePid(2) && e.name === 'B5' && (e.args as { iteration: number }).iteration === 1,
    ) as ChromeEvent;
    assert.equal(box.cat, 'B');
    assert.ok(Math.abs((box.ts + (box.dur as number)) / 1000 - (end.t - origin)) < 1e-6, 'box ends at the task-end');
    assert.deepEqual(Object.keys(box.args as object).sort(), [
      'backpressure',
      'chunk',
      'inflight',
      'iteration',
      'microbatch',
    ]);
  });

  it('names the processes after stages and the threads compute, comm and waits', () => {
    const meta = toChromeTrace(ofb, { job: 'j', stages: 4 }).traceEvents.filter((e) => e.ph === 'M');
    assert.deepEqual(
      meta.filter((e) => e.name === 'process_name').map((e) => (e.args as { name: string }).name),
      ['stage 0', 'stage 1', 'stage 2', 'stage 3'],
    );
    assert.deepEqual(
      [
        ...new Set(
          meta.filter((e) => e.name === 'thread_name').map((e) => `${e.tid}:${(e.args as { name: string }).name}`),
        ),
      ],
      ['1:compute', '2:comm', '3:waits'],
    );
  });

  it('draws one comm event per message and pairs every flow start with a finish on the receiver', () => {
    const trace = toChromeTrace(bf, { job: 'j', stages: 4 });
    const comm = trace.traceEvents.filter((e) => e.ph === 'X' && e.tid === TID.comm);
    assert.equal(comm.length, of(bf, 'send').length);
    assert.equal(comm.length, 2 * 2 * 3 * 8, 'activations and gradients over 3 links, 8 microbatches, 2 iterations');
    const starts = trace.traceEvents.filter((e) => e.ph === 's');
    const finishes = new Map(trace.traceEvents.filter((e) => e.ph === 'f').map((e) => [e.id, e]));
    assert.equal(starts.length, comm.length);
    assert.equal(finishes.size, starts.length);
    for (const s of starts) {
      const f = finishes.get(s.id) as ChromeEvent;
      assert.ok(f, `flow ${s.id} finishes`);
      assert.equal(f.cat, s.cat);
      assert.equal(f.bp, 'e');
      assert.equal(f.tid, TID.comm);
      assert.ok(f.ts >= s.ts);
      assert.equal(f.pid, s.cat === 'activation' ? s.pid + 1 : s.pid - 1, `${s.cat} flows to the neighbour`);
    }
  });

  it('puts waits on their own track and an in-flight counter sample at every task start', () => {
    const trace = toChromeTrace(bf, { job: 'j', stages: 4 });
    const waits = trace.traceEvents.filter((e) => e.ph === 'X' && e.tid === TID.waits);
    assert.equal(waits.length, of(bf, 'wait').length);
    assert.ok(waits.length > 0);
    const counters = trace.traceEvents.filter((e) => e.ph === 'C');
    assert.equal(counters.length, of(bf, 'task-start').length);
    assert.ok(Math.max(...counters.map((c) => (c.args as { forwards: number }).forwards)) >= 2);
  });

  it('starts its clock at the first event and embeds the original events', () => {
    const shifted = bf.map((e) => ({ ...e, t: e.t + 5000 }));
    const trace = toChromeTrace(shifted, { job: 'j', stages: 4 });
    assert.equal(Math.min(...trace.traceEvents.filter((e) => e.ph !== 'M').map((e) => e.ts)), 0);
    assert.equal(trace.metadata.time_origin_ms, 5000);
    assert.equal(trace.metadata.baton_events.length, bf.length);
  });

  it('puts every task boundary on one nanosecond grid: no task overlaps the next by a rounding', () => {
    // Rounded apart, ts 1 ns + dur 1 ns would end F0 at 2 ns, after F1's start at 1 ns.
    const ev: BatonEvent[] = [
      { type: 'iteration-start', t: 0, stage: 0, iteration: 0 },
      forwardStart(6e-7),
      forwardEnd(1.2e-6),
      {
        type: 'task-start',
        t: 1.2e-6,
        stage: 0,
        iteration: 0,
        kind: 'F',
        mb: 1,
        chunk: 0,
        inflight: 2,
        backpressure: false,
      },
      { type: 'task-end', t: 1, stage: 0, iteration: 0, kind: 'F', mb: 1, chunk: 0 },
    ];
    const trace = toChromeTrace(ev, { job: 'j', stages: 1 });
    assert.deepEqual(perfettoDrops(trace.traceEvents), []);
    const [f0, f1] = trace.traceEvents.filter((e) => e.ph === 'X');
    assert.equal(Math.round((f0.ts + (f0.dur as number)) * 1000), Math.round(f1.ts * 1000));
  });

  it('leaves nothing for Perfetto to drop in a jittered run with slow messages, and binds every flow to its message', async () => {
    const events = await run({ stages: 8, microbatches: 32, profile: 'llm', policy: 'bf' });
    const trace = toChromeTrace(events, { job: 'j', stages: 8 });
    assert.deepEqual(perfettoDrops(trace.traceEvents), []);
    assert.deepEqual(
      flowBindings(trace.traceEvents).filter((b) => !b.ok),
      [],
    );
    assert.equal(
      trace.traceEvents.filter((e) => e.ph === 'X' && e.tid === TID.compute).length,
      of(events, 'task-start').length,
    );
    assert.equal(
      trace.traceEvents.filter((e) => e.ph === 'X' && e.cat !== 'wait' && e.tid !== TID.compute).length,
      of(events, 'send').length,
    );
  });

  it('puts messages in flight at once on separate comm lanes of the sender', () => {
    const msg = (t: number, mb: number, type: 'send' | 'receive'): BatonEvent =>
      type === 'send'
        ? { type, t, stage: 0, iteration: 0, kind: 'activation', mb, chunk: 0, dst: 1, seq: mb, bytes: 8 }
        : { type, t, stage: 1, iteration: 0, kind: 'activation', mb, chunk: 0, src: 0, seq: mb, bytes: 8, latency: 10 };
    // mb0 is in flight from 0 to 10 ms, mb1 from 5 to 15, mb2 from 12 to 22 (lane 0 is free again).
    const ev = [
      msg(0, 0, 'send'),
      msg(5, 1, 'send'),
      msg(10, 0, 'receive'),
      msg(12, 2, 'send'),
      msg(15, 1, 'receive'),
      msg(22, 2, 'receive'),
    ];
    const trace = toChromeTrace(ev, { job: 'j', stages: 2 });
    assert.deepEqual(checkChromeTrace(trace), []);
    assert.deepEqual(perfettoDrops(trace.traceEvents), []);
    assert.deepEqual(
      flowBindings(trace.traceEvents).map((b) => b.ok),
      [true, true, true, true, true, true],
    );
    const comm = trace.traceEvents.filter((e) => e.ph === 'X');
    assert.deepEqual(
      comm.map((e) => [e.name, e.tid]),
      [
        ['activation mb0 0→1', TID.comm],
        ['activation mb1 0→1', commTid(1)],
        ['activation mb2 0→1', TID.comm],
      ],
    );
    const threads = trace.traceEvents
      .filter((e) => e.ph === 'M' && e.name === 'thread_name' && e.pid === stagePid(0))
      .map((e) => `${e.tid}:${(e.args as { name: string }).name}`);
    assert.deepEqual(threads, ['1:compute', '2:comm', `${commTid(1)}:comm 2`, '3:waits']);
    const { baton_events: _dropped, ...rest } = trace.metadata;
    assert.equal(
      of(batonEventsFromTrace({ traceEvents: trace.traceEvents, metadata: rest }), 'send').length,
      3,
      'messages on every lane are read back',
    );
  });

  it('uses no pid 0 or tid 0, which Perfetto reads as the idle process and its swapper thread', () => {
    const trace = toChromeTrace(bf, { job: 'j', stages: 4 });
    assert.deepEqual(
      trace.traceEvents.filter((e) => e.pid === 0 || e.tid === 0),
      [],
    );
    const names = trace.traceEvents
      .filter((e) => e.name === 'process_name')
      .map((e) => `${e.pid}:${(e.args as { name: string }).name}`);
    assert.deepEqual(names, ['1:stage 0', '2:stage 1', '3:stage 2', '4:stage 3']);
  });

  it('refuses a task-end without its start, naming the stage and task', () => {
    const ev: BatonEvent[] = [{ type: 'task-end', t: 3, stage: 1, iteration: 0, kind: 'B', mb: 2, chunk: 1 }];
    assert.throws(() => toChromeTrace(ev, { job: 'j', stages: 2 }), /stage 1, iteration 0: task-end of B2@1/);
  });
});

describe('a trace of a timeline too long to read back', () => {
  it('is refused before it is written, naming the time and what to lower, instead of written for baton trace to refuse', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-trace-'));
    try {
      // Within every profile limit: 10^7 ms forwards, backward 100 times that, one stage, 1024 microbatches: 10^12 ms and more.
      const profile = path.join(dir, 'heavy.json');
      fs.writeFileSync(
        profile,
        JSON.stringify(oneLayerProfile('heavy', { name: 'x', count: 1, forwardMs: 1e7 }, 100, 0.5)),
      );
      const r = await runJob(resolveConfig({ stages: 1, microbatches: 1024, profile }), { clock: 'virtual' });
      const file = path.join(dir, 't.json');
      assert.throws(
        () => writeTraceFiles(r, file),
        (e: Error) =>
          e.name === 'TraceBuildError' &&
          /the run's timeline reaches 1\.0\d\de\+12 ms, beyond the 1000000000000 ms \(about 31 years\) a trace holds/.test(
            e.message,
          ) &&
          /--jitter-scale/.test(e.message),
      );
      assert.equal(fs.existsSync(file), false);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
