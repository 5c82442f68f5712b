import { strict as assert } from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { StalenessMeter, TrainProgress, formatDuration } from '../cli/progress';
import { asyncUpdateRows } from '../cli/train-outputs';
import { lossCurveSvg } from '../cli/report/loss-svg';
import { BatonEvent } from '../stage/events';
import { IterationRecord } from '../actors/coordinator';

const MAIN = path.join(__dirname, '..', 'cli', 'main.js');

function baton(...argv: string[]): { code: number; out: string; err: string } {
  const r = spawnSync(process.execPath, [MAIN, ...argv], { encoding: 'utf8', timeout: 300000 });
  return { code: r.status ?? -1, out: r.stdout, err: r.stderr };
}

/** A two-stage GPT small enough to train in seconds. */
const SMALL = ['train', '--stages', '2', '--microbatches', '2', '--microbatch-size', '2', '--seq', '16'];
const SMALL_MODEL = ['--layers', '2', '--width', '16', '--heads', '2', '--val-batches', '1'];

const task = (type: 'task-start' | 'task-end', t: number, stage: number, kind: 'F' | 'B', mb: number): BatonEvent =>
  type === 'task-start'
    ? { type, t, stage, iteration: 0, kind, mb, chunk: 0, inflight: 0, backpressure: false }
    : { type, t, stage, iteration: 0, kind, mb, chunk: 0 };

/** Stage 0 of a stream: F0 F1 B0 F2 B1 B2 (mb 1's backward waits one update, mb 2's one too). */
const STREAM: BatonEvent[] = (
  [
    [0, 'F', 0],
    [1, 'F', 1],
    [5, 'B', 0],
    [6, 'F', 2],
    [8, 'B', 1],
    [10, 'B', 2],
  ] as const
).flatMap(([t, kind, mb]) => [task('task-start', t, 0, kind, mb), task('task-end', t + 1, 0, kind, mb)]);

/** A TrainProgress writing into `lines`, with the options a test sets over these. */
function progressInto(lines: string[], opts: Partial<ConstructorParameters<typeof TrainProgress>[0]>): TrainProgress {
  return new TrainProgress({
    mode: 'sync',
    total: 1,
    tokensPerUnit: 1,
    clock: 'real',
    write: (s) => lines.push(s),
    tty: false,
    ...opts,
  });
}

describe('training progress on stderr', () => {
  it('formats durations short: seconds, then minutes, then hours', () => {
    assert.equal(formatDuration(12345), '12.3s');
    assert.equal(formatDuration(65000), '1m05s');
    assert.equal(formatDuration(3 * 3600e3 + 60e3), '3h01m');
    assert.equal(formatDuration(NaN), '?');
  });

  it('writes one line per synchronous iteration with loss, tokens/s, elapsed and an ETA from the pace so far', () => {
    let now = 0;
    const lines: string[] = [];
    const p = progressInto(lines, { total: 4, tokensPerUnit: 1000, now: () => now });
    const rec = (iteration: number): IterationRecord => ({ iteration, start: 0, end: 500, makespan: 500, reports: [] });
    now = 2000;
    p.onIteration(rec(0), 3.5);
    now = 4000;
    p.onIteration(rec(1), 3.25);
    assert.deepEqual(lines, [
      'iteration 1/4  loss 3.5000  2000 tokens/s  elapsed 2.0s  ETA 6.0s\n',
      'iteration 2/4  loss 3.2500  2000 tokens/s  elapsed 4.0s  ETA 4.0s\n',
    ]);
  });

  it('redraws one line on a terminal and ends it once', () => {
    const lines: string[] = [];
    const p = progressInto(lines, { clock: 'virtual', tty: true });
    p.onIteration({ iteration: 0, start: 0, end: 1, makespan: 1, reports: [] }, 1);
    p.finish();
    p.finish();
    assert.match(lines[0], /^\riteration 1\/1 {2}loss 1\.0000 {2}makespan 1\.0 ms \(virtual\).*ETA 0s\x1b\[K$/);
    assert.deepEqual(lines.slice(1), ['\n']);
  });

  it('counts asynchronous updates, the staleness stage 0 observed and the latest loss from the events', () => {
    const m = new StalenessMeter();
    const updates = STREAM.filter((e) => m.observe(e)).length;
    assert.equal(updates, 3);
    assert.equal(m.max, 1);
    assert.equal(m.mean.toFixed(3), (2 / 3).toFixed(3));
    const lines: string[] = [];
    const p = progressInto(lines, { mode: 'async', total: 3, tokensPerUnit: 10, everyMs: 1e9 });
    // The loss stage's task-end carries its microbatch's loss; the line shows the latest.
    const withLoss = STREAM.map((e) => (e.type === 'task-end' && e.kind === 'B' ? { ...e, loss: 3 - e.mb / 4 } : e));
    for (const e of withLoss) p.sink(e);
    // The first update writes, the next are within everyMs, the last always writes.
    assert.equal(lines.length, 2);
    assert.match(
      lines[1],
      /^update 3\/3 {2}loss 2\.5000 {2}staleness at stage 0 mean 0\.7 max 1 {2}\d+ tokens\/s {2}elapsed .* ETA 0s\n$/,
    );
  });

  it("lists an asynchronous run's updates in stage 0's order with their loss, time and staleness", () => {
    const rows = asyncUpdateRows(STREAM, [3, 2.5, NaN]);
    assert.deepEqual(rows, [
      { update: 1, mb: 0, loss: 3, t_ms: 6, staleness: 0 },
      { update: 2, mb: 1, loss: 2.5, t_ms: 9, staleness: 1 },
      { update: 3, mb: 2, loss: null, t_ms: 11, staleness: 1 },
    ]);
  });
});

describe('the loss plot (SVG)', () => {
  it('draws the training curve and a validation point, leaving out losses that are not finite', () => {
    const svg = lossCurveSvg({
      title: 'gpt <P=2>',
      xLabel: 'iteration',
      series: [
        {
          name: 'training loss',
          points: [
            [1, 4],
            [2, 3.5],
            [3, NaN],
            [4, 3],
          ],
        },
      ],
      validation: [{ name: 'validation loss', x: 4, y: 3.2 }],
    });
    assert.match(svg, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
    assert.match(svg, /gpt &lt;P=2&gt;/);
    assert.equal((svg.match(/<polyline class="loss" points="([^"]*)"/)?.[1] ?? '').split(' ').length, 3);
    assert.equal((svg.match(/class="validation"/g) ?? []).length, 1);
    assert.match(svg, /1 not finite, left out/);
    assert.ok(svg.trimEnd().endsWith('</svg>'));
  });
});

describe('baton train: outputs you can watch', function () {
  this.timeout(300000);
  let dir = '';
  before(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-watch-'))));
  after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const f = (name: string) => path.join(dir, name);
  /** The small model trained with `argv`, --json and --metrics to `metrics`, exiting 0: its stderr, result, metrics lines. */
  function trainWithMetrics<Line>(argv: string[], metrics: string) {
    const r = baton(...SMALL, ...SMALL_MODEL, ...argv, '--json', '--metrics', metrics);
    assert.equal(r.code, 0, r.err);
    const lines = fs
      .readFileSync(metrics, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Line);
    return { err: r.err, result: JSON.parse(r.out) as { losses: number[] }, lines };
  }

  it('shows progress under --json, writes metrics, plot, trace and chart, and --quiet silences the progress', () => {
    const { err, result, lines } = trainWithMetrics<{ iteration: number; loss: number }>(
      ['--iterations', '3', '--plot', f('p.svg'), '--trace', f('t.json'), '--gantt', f('g.svg')],
      f('m.jsonl'),
    );
    assert.deepEqual(
      err
        .split('\n')
        .filter((l) => l.startsWith('iteration'))
        .map((l) => l.split('  ').slice(0, 2).join('  ')),
      result.losses.map((l, i) => `iteration ${i + 1}/3  loss ${l.toFixed(4)}`),
    );
    assert.match(err, /tokens\/s {2}elapsed [\d.]+s {2}ETA/);
    assert.deepEqual(
      lines.map((l) => [l.iteration, l.loss]),
      result.losses.map((l, i) => [i, l]),
    );
    assert.match(fs.readFileSync(f('p.svg'), 'utf8'), /class="validation"/);
    assert.match(fs.readFileSync(f('g.svg'), 'utf8'), /class="task"/);
    assert.ok(
      Array.isArray((JSON.parse(fs.readFileSync(f('t.json'), 'utf8')) as { traceEvents: unknown[] }).traceEvents),
    );
    const quiet = baton(...SMALL, ...SMALL_MODEL, '--iterations', '1', '--json', '--quiet');
    assert.equal(quiet.code, 0, quiet.err);
    assert.doesNotMatch(quiet.err, /iteration 1\/1/);
  });

  it('shows asynchronous progress (updates, staleness) and writes one metrics line per update', () => {
    const { err, result, lines } = trainWithMetrics<{ mb: number; loss: number }>(
      ['--mode', 'async', '--iterations', '2'],
      f('am.jsonl'),
    );
    // The loss shown live is the latest microbatch's, as the stages report at the end (mb 3 is the last).
    assert.ok(err.includes(`update 4/4  loss ${result.losses[3].toFixed(4)}  staleness at stage 0 mean`), err);
    assert.equal(lines.length, 4);
    for (const line of lines) assert.equal(line.loss, result.losses[line.mb]);
  });

  it('refuses output paths that cannot be written, or two flags naming one file, before it trains (exit 2)', () => {
    for (const [argv, msg] of [
      [['--metrics', path.join(dir, 'none', 'm.jsonl')], /--metrics .*does not exist/],
      [['--plot', dir], /--plot .*is a directory/],
      [['--plot', f('same'), '--metrics', f('same')], /--plot .* is the file --metrics .* is written to as well/],
      [['--report', f('x.html'), '--trace', f('x.html')], /--report .* is the file --trace .* is written to as well/],
      [['--quiet=1'], /--quiet takes no value/],
    ] as const) {
      const r = baton(...SMALL, ...SMALL_MODEL, ...argv);
      assert.equal(r.code, 2, `${argv.join(' ')}: ${r.err}`);
      assert.match(r.err, msg);
    }
  });
});
