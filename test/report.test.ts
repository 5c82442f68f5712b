import { strict as assert } from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { latencyHistogram, stageUse } from '../cli/report/report-stats';
import { reportHtml } from '../cli/report/report-html';
import { reportFromFiles } from '../cli/report/report-command';
import { BatonEvent } from '../stage/events';
import { findChromium, visitPage } from './helpers-chromium';
import { activationReceive } from './helpers-events';

const MAIN = path.join(__dirname, '..', 'cli', 'main.js');

function baton(...argv: string[]): { code: number; out: string; err: string } {
  const r = spawnSync(process.execPath, [MAIN, ...argv], { encoding: 'utf8', timeout: 300000 });
  return { code: r.status ?? -1, out: r.stdout, err: r.stderr };
}

const SIM = 'sim --stages 4 --microbatches 8 --profile multimodal --jitter paper --seed 1'.split(' ');
const COMPARED = ['--compare', '1f1b,bf,bf@depth'];

const start = (t: number, stage: number, mb: number): BatonEvent => ({
  type: 'task-start',
  t,
  stage,
  iteration: 0,
  kind: 'F',
  mb,
  chunk: 0,
  inflight: 1,
  backpressure: false,
});
const end = (t: number, stage: number, mb: number): BatonEvent => ({
  type: 'task-end',
  t,
  stage,
  iteration: 0,
  kind: 'F',
  mb,
  chunk: 0,
});

describe('report statistics', () => {
  it("splits each stage's share of the iteration into busy, waits by reason and other idle", () => {
    const events: BatonEvent[] = [
      start(0, 0, 0),
      end(4, 0, 0),
      { type: 'wait', t: 4, stage: 1, iteration: 0, ms: 4, reason: 'nothing-ready' },
      start(4, 1, 0),
      end(10, 1, 0),
    ];
    const [s0, s1] = stageUse(events, 2);
    assert.deepEqual(s0, { stage: 0, span_ms: 10, busy_ms: 4, wait_ms: {}, other_idle_ms: 6 });
    assert.deepEqual(s1, { stage: 1, span_ms: 10, busy_ms: 6, wait_ms: { 'nothing-ready': 4 }, other_idle_ms: 0 });
  });

  it('bins latencies up to the 99th percentile, the rest in the last bin', () => {
    const recv = (latency: number): BatonEvent => activationReceive(0, 0, 1, latency);
    const h = latencyHistogram([...Array.from({ length: 99 }, (_, i) => recv(i / 10)), recv(1000)], 10);
    assert.equal(h.total, 100);
    assert.equal(
      h.counts.reduce((a, b) => a + b, 0),
      100,
    );
    assert.equal(h.max, 1000);
    assert.ok(h.counts[9] >= 1, 'the outlier lands in the last bin');
  });
});

describe('baton report', function () {
  this.timeout(300000);
  let dir = '';
  const f = (name: string) => path.join(dir, name);
  before(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-report-'))));
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('makes one self-contained page from a comparison and its traces: every chart on one time axis', () => {
    const sim = baton(...SIM, ...COMPARED, '--json', '--trace', f('t.json'));
    assert.equal(sim.code, 0, sim.err);
    fs.writeFileSync(f('cmp.json'), sim.out);
    const traces = ['t.json', 't.bf.json', 't.bf_depth.json'].map(f);
    const r = baton('report', f('cmp.json'), ...traces, '-o', f('cmp.html'));
    assert.equal(r.code, 0, r.err);
    const html = fs.readFileSync(f('cmp.html'), 'utf8');
    assert.match(html, /Content-Security-Policy" content="default-src 'none'/);
    assert.doesNotMatch(html, /\b(src|href)=["']?https?:/);
    // One chart per compared run, each labelled, and all of one span (the longest run's).
    const data = reportFromFiles([f('cmp.json'), ...traces]);
    assert.deepEqual(
      data.runs.map((x) => x.label),
      ['1f1b', 'bf', 'bf @depth'],
    );
    const axes = [...html.matchAll(/<svg[^>]*viewBox="0 0 1100 [^"]*"[\s\S]*?<\/svg>/g)].map((m) => {
      const ticks = [...m[0].matchAll(/text-anchor="middle">([\d.]+)<\/text>/g)].map((t) => t[1]);
      return ticks.join(',');
    });
    assert.equal(axes.length, 3);
    assert.equal(new Set(axes).size, 1, 'the three charts share one time axis');
    // Peak in-flight beside every speedup: bf at the default limit holds more than at depth.
    const rows = JSON.parse(sim.out) as { peak_inflight: number[]; speedup: number }[];
    assert.deepEqual(rows[2].peak_inflight, [4, 3, 2, 1]);
    assert.ok(Math.max(...rows[1].peak_inflight) > 4);
    assert.match(html, /<th>speedup vs 1f1b<\/th><th>peak in-flight<\/th>/);
    assert.match(html, /id="utilization"/);
    assert.match(html, /id="latency"/);
  });

  it('renders the swaps a run recorded, when its JSON has them', () => {
    const html = reportHtml({
      title: 't',
      rows: [{ policy: 'bf', makespan_ms: 1, swaps: [{ from: 'bf', to: 'fb', at: 3, by: 'cli' }] }],
      runs: [],
      losses: [],
      source: 'test',
    });
    assert.match(html, /Policy swaps \(1\)/);
    assert.match(html, /<td>fb<\/td>/);
  });

  it('writes the report straight from run --report', () => {
    const r = baton(
      'run',
      '--transport',
      'local',
      '--stages',
      '2',
      '--microbatches',
      '2',
      '--compare',
      '1f1b,bf',
      '--report',
      f('run.html'),
    );
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /wrote .*run\.html/);
    const html = fs.readFileSync(f('run.html'), 'utf8');
    assert.equal((html.match(/class="chart gantt"/g) ?? []).length, 2);
  });

  it('refuses bad input with exit 2 and a message naming it', () => {
    fs.writeFileSync(f('bad.json'), '{"x": 1}');
    fs.writeFileSync(f('broken.json'), '{');
    for (const [argv, msg] of [
      [['report', '-o', f('x.html')], /give RUN\.json/],
      [['report', f('bad.json')], /-o FILE\.html is required/],
      [['report', f('bad.json'), '-o', f('x.html')], /bad\.json: not a --json result/],
      [['report', f('broken.json'), '-o', f('x.html')], /broken\.json is not JSON/],
      [['report', f('missing.json'), '-o', f('x.html')], /missing\.json/],
      [['report', f('bad.json'), '-o', dir], /is a directory/],
      [['run', '--transport', 'local', '--report', path.join(dir, 'no', 'r.html')], /--report .*does not exist/],
    ] as const) {
      const r = baton(...argv);
      assert.equal(r.code, 2, `${argv.join(' ')}: ${r.err}`);
      assert.match(r.err, msg);
    }
  });

  it('opens in headless Chromium with no console error and no network request, showing the Gantt, the loss curve and the tables', async function () {
    const chromium = findChromium();
    if (!chromium) {
      console.log(
        '      (skipped: no Chromium at /usr/bin/chromium; scripts/test.sh installs the Debian package chromium)',
      );
      this.skip();
    }
    const train = baton(
      'train',
      '--stages',
      '4',
      '--microbatches',
      '4',
      '--microbatch-size',
      '2',
      '--seq',
      '16',
      '--layers',
      '4',
      '--width',
      '16',
      '--heads',
      '2',
      '--val-batches',
      '1',
      '--iterations',
      '6',
      '--jitter',
      'paper',
      '--json',
      '--quiet',
      '--trace',
      f('train-trace.json'),
      '--report',
      f('train.html'),
    );
    assert.equal(train.code, 0, train.err);
    fs.writeFileSync(f('train.json'), train.out);
    const r = baton('report', f('train.json'), f('train-trace.json'), '-o', f('from-files.html'));
    assert.equal(r.code, 0, r.err);
    const probe = `JSON.stringify({
      gantt: document.querySelectorAll('.gantt svg rect.task').length,
      loss: document.querySelectorAll('svg.loss-curve polyline.loss').length,
      tables: document.querySelectorAll('table.data').length,
      width: document.querySelector('svg.loss-curve').getBoundingClientRect().width
    })`;
    for (const page of ['train.html', 'from-files.html']) {
      const v = await visitPage(chromium!, f(page), probe);
      assert.deepEqual(v.errors, [], `${page}: console errors`);
      assert.deepEqual(v.requests, [], `${page}: network requests`);
      const seen = JSON.parse(v.probed as string) as { gantt: number; loss: number; tables: number; width: number };
      assert.ok(seen.gantt >= 4 * 4 * 2 * 6, `${page}: every task of the Gantt drawn (${seen.gantt})`);
      assert.equal(seen.loss, 1);
      assert.ok(seen.tables >= 2);
      assert.ok(seen.width > 500, 'the loss curve is laid out');
      assert.ok(v.screenshot.length > 10000);
      // To look at it: BATON_SCREENSHOT_DIR=dir keeps the screenshots there.
      const keep = process.env.BATON_SCREENSHOT_DIR;
      if (keep) fs.writeFileSync(path.join(keep, `report-${page}.png`), v.screenshot);
    }
  });
});
