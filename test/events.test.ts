import { strict as assert } from 'assert';
import { BatonEvent, eventProblem } from '../stage/events';
import { activationReceive, activationSend } from './helpers-events';

describe('events from the wire', () => {
  const good: BatonEvent[] = [
    { type: 'task-start', t: 1, stage: 0, iteration: 0, kind: 'F', mb: 0, chunk: 0, inflight: 1, backpressure: false },
    { type: 'task-end', t: 2, stage: 0, iteration: 0, kind: 'B', mb: 3, chunk: 1 },
    { ...activationSend(2, 4, 16), cpuMs: 0.1 },
    activationReceive(3, 4, 16, 1),
    { type: 'wait', t: 0, stage: 1, iteration: 0, ms: 2, reason: 'nothing-ready' },
    { type: 'reject', t: 0, stage: 1, iteration: -1, reason: 'malformed', detail: 'x' },
    { type: 'iteration-start', t: 0, stage: 2, iteration: 1 },
  ];

  it('accepts every kind of event the stages emit', () => {
    for (const e of good) assert.equal(eventProblem(e), null, JSON.stringify(e));
  });

  it('names what is wrong with a malformed one', () => {
    const cases: [unknown, RegExp][] = [
      [null, /must be a map/],
      [[1], /must be a map/],
      [{}, /unknown event type undefined/],
      [{ type: 'toString', t: 0, stage: 0, iteration: 0 }, /unknown event type "toString"/],
      [
        { ...good[0], t: 'soon' },
        /task-start event: field "t" must be a number from -1000000000000 to 1000000000000 \(ms\)/,
      ],
      [{ ...good[0], stage: -1 }, /field "stage" must be an integer from 0 to 1023/],
      [{ ...good[0], kind: 'X' }, /field "kind" must be F, B or W/],
      [{ ...good[0], backpressure: 1 }, /field "backpressure" must be a boolean/],
      [{ ...good[2], bytes: 'lots' }, /send event: field "bytes" must be an integer >= 0/],
      [{ ...good[2], cpuMs: NaN }, /field "cpuMs" must be a finite number/],
      [{ ...good[3], latency: null }, /receive event: field "latency"/],
      [{ ...good[4], reason: 'bored' }, /field "reason" must be nothing-ready, binding, backpressure, tp-defer/],
      [{ ...good[5], detail: 5 }, /reject event: field "detail" must be a string/],
      // Bounds: whatever reads events back (trace gantt and summary, statistics) may rely on them.
      [{ ...good[0], t: 1e308 }, /field "t" must be a number from/],
      [{ ...good[1], t: -2e12 }, /field "t" must be a number from/],
      [{ ...good[0], stage: 1024 }, /field "stage" must be an integer from 0 to 1023/],
      [{ ...good[0], chunk: 1e9 }, /field "chunk" must be an integer from 0 to 63/],
      [{ ...good[1], mb: 262_144 }, /field "mb" must be an integer from 0 to 262143/],
      [{ ...good[2], dst: 1024 }, /field "dst" must be an integer from -1 to 1023/],
      [{ ...good[3], latency: Infinity }, /field "latency" must be a number from/],
      [{ ...good[4], ms: 1e13 }, /field "ms" must be a number from 0 to 1000000000000/],
    ];
    for (const [x, re] of cases) assert.match(String(eventProblem(x)), re, JSON.stringify(x));
  });

  it('names a type that is no string without converting it (a list nested 20000 deep would overflow the stack)', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 20000; i++) deep = [deep];
    assert.equal(eventProblem({ type: deep, t: 0, stage: 0, iteration: 0 }), 'unknown event type object');
    assert.equal(eventProblem({ type: 5 }), 'unknown event type number');
  });
});
