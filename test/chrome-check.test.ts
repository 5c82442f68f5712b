import { strict as assert } from 'assert';
import { ChromeEvent } from '../cli/trace/chrome';
import { checkChromeTrace } from '../cli/trace/chrome-check';

const valid = (): ChromeEvent[] => [
  { name: 'process_name', ph: 'M', ts: 0, pid: 0, tid: 0, args: { name: 'stage 0' } },
  { name: 'F0', cat: 'F', ph: 'X', ts: 0, dur: 10, pid: 0, tid: 0 },
  { name: 'm', cat: 'activation', ph: 's', id: 1, ts: 10, pid: 0, tid: 1 },
  { name: 'm', cat: 'activation', ph: 'f', bp: 'e', id: 1, ts: 12, pid: 1, tid: 1 },
];

describe('the trace schema check', () => {
  it('accepts a small well-formed trace in both object and array form', () => {
    assert.deepEqual(checkChromeTrace({ traceEvents: valid(), displayTimeUnit: 'ms' }), []);
    assert.deepEqual(checkChromeTrace(valid()), []);
  });

  const broken: [string, (ev: Record<string, unknown>[]) => void, RegExp][] = [
    ['a missing ts', (ev) => delete ev[1].ts, /traceEvents\[1\].*ts must be a finite number/],
    ['a string ts', (ev) => (ev[1].ts = '12'), /ts must be a finite number.*"12"/],
    ['a negative dur', (ev) => (ev[1].dur = -5), /traceEvents\[1\].*dur >= 0, got -5/],
    ['a complete event without dur', (ev) => delete ev[1].dur, /dur >= 0, got nothing/],
    ['an unknown ph', (ev) => (ev[1].ph = 'Q'), /ph must be one of .*got "Q"/],
    ['a flow without id', (ev) => delete ev[2].id, /traceEvents\[2\].*flow event needs an id/],
    ['a flow start without a finish', (ev) => ev.pop(), /flow id 1 .*start without a finish/],
    [
      'a flow finishing before it starts',
      (ev) => (ev[3].ts = 1),
      /flow id 1: finishes at 1 us before it starts at 10 us/,
    ],
    ['a missing pid', (ev) => delete ev[1].pid, /pid must be a number/],
    ['a missing name', (ev) => delete ev[1].name, /name must be a string/],
    [
      'a process_name without args.name',
      (ev) => (ev[0].args = {}),
      /metadata process_name needs args.name as a string/,
    ],
    ['args that are not an object', (ev) => (ev[1].args = [1]), /args must be an object/],
  ];
  for (const [what, breakIt, message] of broken)
    it(`reports ${what}`, () => {
      const ev = valid() as unknown as Record<string, unknown>[];
      breakIt(ev);
      const problems = checkChromeTrace({ traceEvents: ev });
      assert.ok(
        problems.some((p) => message.test(p)),
        `expected ${message} in ${JSON.stringify(problems)}`,
      );
    });

  it('reports a counter with a non-numeric series and a wrong top level', () => {
    const ev = [...valid(), { name: 'c', ph: 'C', ts: 1, pid: 0, tid: 0, args: { x: 'high' } }];
    assert.match(checkChromeTrace({ traceEvents: ev }).join('\n'), /counter series "x" must be a number, got "high"/);
    assert.match(checkChromeTrace({ events: [] })[0], /traceEvents must be an array/);
    assert.match(checkChromeTrace('hello')[0], /expected an object with traceEvents/);
  });
});
