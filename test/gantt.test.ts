import { strict as assert } from 'assert';
import { resolveConfig, JobConfig } from '../job/config';
import { BatonEvent } from '../stage/events';
import { runJob } from '../job/run-local';
import { escapeXml, ganttSvg, ganttTasks, tickStep } from '../cli/trace/gantt';
import { forwardEnd, forwardStart } from './helpers-events';

const run = async (c: Partial<JobConfig>) =>
  (await runJob(resolveConfig({ stages: 4, microbatches: 8, jitter: 'paper', ...c }), { clock: 'virtual' })).events;

/** Element names in document order; throws on an unbalanced or crossed tag. */
function checkBalanced(svg: string): string[] {
  const stack: string[] = [];
  const seen: string[] = [];
  for (const m of svg.matchAll(/<(\/?)([a-zA-Z]+)[^>]*?(\/?)>/g)) {
    const [, close, name, selfClose] = m;
    if (close) assert.equal(stack.pop(), name, `closing </${name}> matches its opening tag`);
    else {
      seen.push(name);
      if (!selfClose) stack.push(name);
    }
  }
  assert.deepEqual(stack, [], 'every tag is closed');
  return seen;
}

const taskRects = (svg: string) =>
  [...svg.matchAll(/<rect class="task" x="([\d.]+)" y="([\d.]+)" width="([\d.]+)"[^>]*><title>([^<]*)<\/title>/g)].map(
    (m) => ({ x: Number(m[1]), y: Number(m[2]), w: Number(m[3]), tip: m[4] }),
  );

describe('pipeline Gantt chart (SVG)', () => {
  let bf: BatonEvent[];
  before(async () => {
    bf = await run({ policy: 'bf', iterations: 2 });
  });

  it('is a standalone SVG document with balanced tags', () => {
    const svg = ganttSvg(bf, { stages: 4, title: 'bf' });
    assert.match(svg, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg" viewBox="0 0 1200 \d+"/);
    assert.ok(svg.trimEnd().endsWith('</svg>'));
    const tags = checkBalanced(svg);
    assert.equal(tags[0], 'svg');
  });

  it('draws one box per executed task, stage 0 on top', () => {
    const svg = ganttSvg(bf, { stages: 4 });
    const rects = taskRects(svg);
    assert.equal(rects.length, bf.filter((e) => e.type === 'task-start').length);
    const rowY = (s: number) => new Set(rects.filter((r) => r.tip.startsWith(`stage ${s},`)).map((r) => r.y));
    for (let s = 0; s < 4; s++) assert.equal(rowY(s).size, 1, `stage ${s} is one row`);
    assert.ok([...rowY(0)][0] < [...rowY(1)][0] && [...rowY(1)][0] < [...rowY(3)][0]);
  });

  it('makes box widths proportional to task durations and leaves idle gaps', () => {
    const tasks = ganttTasks(bf);
    const rects = taskRects(ganttSvg(bf, { stages: 4, width: 2000 }));
    const [a, b] = [tasks[0], tasks.reduce((x, y) => (y.end - y.start > x.end - x.start ? y : x))];
    const wa = rects[0].w;
    const wb = rects[tasks.indexOf(b)].w;
    assert.ok(Math.abs(wb / wa - (b.end - b.start) / (a.end - a.start)) < 0.02, `${wb}/${wa}`);
    const stage0 = rects.filter((r) => r.tip.startsWith('stage 0,')).sort((p, q) => p.x - q.x);
    const gaps = stage0.slice(1).filter((r, i) => r.x - (stage0[i].x + stage0[i].w) > 1);
    assert.ok(gaps.length > 0, 'stage 0 waits for gradients under jitter, and the chart shows it');
  });

  it('colours F, B and W differently and shades chunks', async () => {
    const svg = ganttSvg(await run({ policy: 'bfw', chunks: 2 }), { stages: 4 });
    const fills = new Set([...svg.matchAll(/<rect class="task"[^>]*fill="([^"]+)"/g)].map((m) => m[1]));
    assert.equal(fills.size, 6, `3 kinds x 2 chunks, got ${[...fills].join(' ')}`);
    for (const label of ['F chunk 0', 'B chunk 1', 'W chunk 1', 'idle'])
      assert.ok(svg.includes(`>${label}</text>`), `legend has ${label}`);
  });

  it('labels iterations without covering one label with the next, inside the chart', async () => {
    const svg = ganttSvg(await run({ policy: 'bf', stages: 4, microbatches: 4, iterations: 30 }), { stages: 4 });
    assert.equal((svg.match(/class="iteration"/g) ?? []).length, 30, 'a line at every iteration');
    const labels = [
      ...svg.matchAll(/<text x="([-\d.]+)" y="\d+" font-size="10" fill="#b71c1c"[^>]*>([^<]+)<\/text>/g),
    ].map((m) => ({ x: Number(m[1]), text: m[2] }));
    assert.ok(labels.length >= 2, `${labels.length} labels`);
    // At font-size 10 a character of Helvetica is at most 5.6 px wide.
    labels.forEach((l, i) => {
      assert.ok(l.x >= 0 && l.x + l.text.length * 5.6 <= 1200, `${l.text} at ${l.x} lies inside the chart`);
      if (i > 0)
        assert.ok(
          labels[i - 1].x + labels[i - 1].text.length * 5.6 <= l.x,
          `${labels[i - 1].text} at ${labels[i - 1].x} ends before ${l.text} at ${l.x}`,
        );
    });
    assert.match(svg, />iteration 0<\/text>|>0<\/text>/);
  });

  it('wraps the legend under the axis, inside the chart, however many chunks there are', async () => {
    const svg = ganttSvg(await run({ policy: 'bfw', stages: 2, microbatches: 8, chunks: 8 }), { stages: 2 });
    const [, width, height] = (svg.match(/viewBox="0 0 (\d+) (\d+)"/) as string[]).map(Number);
    const axisY = Number((svg.match(/<line x1="64" y1="(\d+)"/) as string[])[1]);
    const entries = [
      ...svg.matchAll(
        /<rect [^>]*x="([-\d.]+)" y="([-\d.]+)" width="12" height="12"[^>]*\/>\n<text [^>]*>([^<]+)<\/text>/g,
      ),
    ].map((m) => ({ x: Number(m[1]), y: Number(m[2]), end: Number(m[1]) + 16 + m[3].length * 7, text: m[3] }));
    assert.equal(entries.length, 3 * 8 + 1, 'F, B and W of 8 chunks, and idle');
    for (const e of entries) {
      assert.ok(e.x >= 0 && e.end <= width, `${e.text} at x ${e.x}..${e.end} lies within the ${width} px width`);
      assert.ok(
        e.y > axisY + 20 && e.y + 12 <= height,
        `${e.text} at y ${e.y} lies under the axis (${axisY}) and inside the ${height} px height`,
      );
    }
    for (const a of entries)
      for (const b of entries)
        if (a !== b && a.y === b.y) assert.ok(a.end <= b.x || b.end <= a.x, `${a.text} and ${b.text} do not overlap`);
  });

  it('marks each iteration and reports the makespan in the title', () => {
    const svg = ganttSvg(bf, { stages: 4, title: 'bf' });
    assert.equal((svg.match(/class="iteration"/g) ?? []).length, 2);
    const tasks = ganttTasks(bf);
    const span = (it: number) =>
      Math.max(...tasks.filter((t) => t.iteration === it).map((t) => t.end)) -
      Math.min(...tasks.filter((t) => t.iteration === it).map((t) => t.start));
    const mean = (span(0) + span(1)) / 2;
    assert.match(svg, new RegExp(`first task to last: ${mean.toFixed(0)} ms per iteration over 2 iterations`));
  });

  it('labels boxes with their microbatch when they fit and drops labels on thin boxes', async () => {
    const labels = (svg: string) => (svg.match(/text-anchor="middle" fill="#[0-9a-f]{6}">\d+<\/text>/g) ?? []).length;
    const small = ganttSvg(bf, { stages: 4 });
    assert.ok(labels(small) >= taskRects(small).length * 0.8, 'most boxes of a P=4 M=8 run are labelled');
    const big = await run({ stages: 32, microbatches: 64, policy: '1f1b', jitter: 'none' });
    const svg = ganttSvg(big, { stages: 32, width: 800 });
    assert.equal(taskRects(svg).length, 32 * 64 * 2);
    assert.equal(labels(svg), 0, 'no label squeezed into a 14 px row of thin boxes');
    assert.equal((svg.match(/>stage \d+<\/text>/g) ?? []).length, 16, 'every other stage is named at P=32');
    checkBalanced(svg);
  });

  it('escapes the title', () => {
    const svg = ganttSvg(bf, { stages: 4, title: 'a & b <c> "d"' });
    assert.ok(svg.includes('>a &amp; b &lt;c&gt; &quot;d&quot;</text>'));
    assert.ok(!svg.includes('<c>'));
    assert.equal(escapeXml(`'&'`), '&apos;&amp;&apos;');
  });

  it('replaces characters XML cannot hold, so the SVG stays well-formed', () => {
    const svg = ganttSvg(bf, { stages: 4, title: 'a\u0001b\u001bc\ufffed\ud800e\udc00f \ud83d\ude80\tg' });
    assert.ok(
      svg.includes('>a\ufffdb\ufffdc\ufffdd\ufffde\ufffdf \ud83d\ude80\tg</text>'),
      'a pair of surrogates and a tab stay',
    );
    assert.doesNotMatch(svg, /[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]/);
  });

  it('labels the axis with the right values when all tasks take no time', () => {
    const ev: BatonEvent[] = [forwardStart(5), forwardEnd(5)];
    const svg = ganttSvg(ev, { stages: 1 });
    const ticks = [...svg.matchAll(/font-size="11" text-anchor="middle">([^<]+)<\/text>/g)].map((m) => Number(m[1]));
    assert.ok(ticks.length >= 2);
    assert.equal(ticks[0], 0);
    ticks
      .slice(1)
      .forEach((v, i) =>
        assert.ok(v > ticks[i] && v <= 1.0001e-9, `tick ${v} follows ${ticks[i]} within the 1e-9 ms span`),
      );
  });

  it('picks axis steps of 1, 2 or 5 times a power of ten', () => {
    assert.deepEqual([tickStep(700), tickStep(80), tickStep(6834), tickStep(0.3)], [100, 10, 1000, 0.05]);
  });

  it('refuses bad sizes and unmatched task ends', () => {
    assert.throws(() => ganttSvg(bf, { stages: 0 }), /stages must be a positive integer, got 0/);
    assert.throws(() => ganttSvg(bf, { stages: 4, width: 50 }), /width must be at least 300 px, got 50/);
    assert.throws(() => ganttSvg([forwardEnd(1)], { stages: 1 }), /task-end of F0 at 1 ms without its task-start/);
  });
});
