import { strict as assert } from 'assert';
import { execFileSync, spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { resolveConfig } from '../job/config';
import { BatonEvent } from '../stage/events';
import { runJob } from '../job/run-local';
import { StageSummary, TRACE_HELP, traceCommand } from '../cli/trace-command';
import { toChromeTrace } from '../cli/trace/chrome';
import { writeChromeTrace } from '../cli/trace/chrome-write';
import { forwardEnd, forwardStart } from './helpers-events';

describe('baton trace', () => {
  let dir: string;
  let file: string;
  let events: BatonEvent[];
  const call = async (...argv: string[]) => {
    const out: string[] = [];
    const err: string[] = [];
    const code = await traceCommand(
      argv,
      (s) => out.push(s),
      (s) => err.push(s),
    );
    return { code, out: out.join('\n'), err: err.join('\n') };
  };

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-trace-'));
    const cfg = resolveConfig({ stages: 3, microbatches: 6, policy: '1f1b', jitter: 'paper', seed: 7, job: 'demo' });
    events = (await runJob(cfg, { clock: 'virtual' })).events;
    file = path.join(dir, 'run.json');
    writeChromeTrace(file, toChromeTrace(events, { job: cfg.job, stages: cfg.stages, config: cfg }));
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('checks a trace written by writeChromeTrace as valid', async () => {
    const r = await call('check', file);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /valid trace, \d+ trace events/);
    const j = await call('check', file, '--json');
    assert.deepEqual(JSON.parse(j.out).problems, []);
    assert.equal(JSON.parse(j.out).valid, true);
  });

  it('exits 1 and lists the problems of a broken trace', async () => {
    const broken = JSON.parse(fs.readFileSync(file, 'utf8'));
    const x = broken.traceEvents.findIndex((e: { ph: string }) => e.ph === 'X');
    broken.traceEvents[x].dur = -1;
    delete broken.traceEvents[x + 1].ts;
    const bad = path.join(dir, 'broken.json');
    fs.writeFileSync(bad, JSON.stringify(broken));
    const r = await call('check', bad);
    assert.equal(r.code, 1);
    assert.match(r.out, /2 problems/);
    assert.match(r.out, new RegExp(`traceEvents\\[${x}\\].*dur >= 0, got -1`));
    const j = await call('check', bad, '--json');
    assert.equal(j.code, 1);
    assert.equal(JSON.parse(j.out).problems.length, 2);
    const g = await call('gantt', bad, '-o', path.join(dir, 'never.svg'));
    assert.equal(g.code, 2);
    assert.match(g.err, /not a valid trace \(2 problems/);
    assert.ok(!fs.existsSync(path.join(dir, 'never.svg')));
  });

  it("checks Baton's embedded events and stage count too, so summary and gantt never meet a bad one", async () => {
    const nullEvent = path.join(dir, 'null-event.json');
    fs.writeFileSync(
      nullEvent,
      JSON.stringify({
        traceEvents: [],
        metadata: {
          baton_events: [null, { type: 'task-end', t: 0, stage: 0, iteration: 0, kind: 'F', mb: -3, chunk: 0 }],
          stages: 1e9,
        },
      }),
    );
    const c = await call('check', nullEvent);
    assert.equal(c.code, 1);
    assert.match(c.out, /metadata\.stages must be an integer from 1 to 1024, got 1000000000/);
    assert.match(c.out, /metadata\.baton_events\[0\]: an event must be a map/);
    assert.match(c.out, /metadata\.baton_events\[1\]: task-end event: field "mb" must be an integer from 0 to 262143/);
    for (const sub of ['summary', 'gantt']) {
      const r = await call(sub, nullEvent, ...(sub === 'gantt' ? ['-o', path.join(dir, 'never.svg')] : []));
      assert.equal(r.code, 2);
      assert.match(r.err, /not a valid trace \(3 problems/);
    }
    const hugePid = path.join(dir, 'huge-pid.json');
    fs.writeFileSync(
      hugePid,
      JSON.stringify({ traceEvents: [{ name: 'F0', cat: 'F', ph: 'X', ts: 0, dur: 1, pid: 1e8, tid: 0 }] }),
    );
    const r = await call('summary', hugePid);
    assert.equal(r.code, 2);
    assert.match(
      r.err,
      /traceEvents\[0\] \(name "F0", pid 100000000, tid 0\) cannot be read as a Baton event: task-start event: field "stage" must be an integer from 0 to 1023/,
    );
  });

  it('refuses, with exit 2 and the reason, traces whose events would hang, corrupt or crash summary and gantt', async () => {
    const write = (name: string, json: unknown) => {
      const f = path.join(dir, name);
      fs.writeFileSync(f, JSON.stringify(json));
      return f;
    };
    const svg = path.join(dir, 'bad.svg');
    const task = (over: Record<string, unknown>) => ({ ...forwardStart(0), inflight: 0, ...over });
    const end = (over: Record<string, unknown>) => ({ ...forwardEnd(1), ...over });
    const X = (args: Record<string, unknown>, over: Record<string, unknown> = {}) => ({
      name: 'F0',
      cat: 'F',
      ph: 'X',
      ts: 0,
      dur: 10000,
      pid: 0,
      tid: 0,
      args,
      ...over,
    });
    const cases: [string, unknown, RegExp][] = [
      // A span of 2e308 ms once spun the axis loop forever; a chunk of 1e9 the legend loop.
      [
        'infinite span',
        { traceEvents: [], metadata: { baton_events: [task({ t: -1e308 }), end({ t: 1e308 })] } },
        /field "t" must be a number from -1000000000000 to 1000000000000/,
      ],
      [
        'huge chunk',
        { traceEvents: [], metadata: { baton_events: [task({ chunk: 1e9 }), end({ chunk: 1e9 })] } },
        /field "chunk" must be an integer from 0 to 63/,
      ],
      [
        'huge chunk in args',
        [X({ chunk: 1e9 })],
        /cannot be read as a Baton event: task-start event: field "chunk" must be an integer from 0 to 63/,
      ],
      // Once copied into the SVG as markup.
      [
        'markup microbatch',
        [X({ microbatch: '<script>alert(1)</script>' })],
        /field "mb" must be an integer from 0 to 262143/,
      ],
      ['fractional pid', [X({}, { pid: 1.5 })], /pid 1\.5.*field "stage" must be an integer from 0 to 1023/],
      [
        'string dst',
        [{ name: 'activation mb0 0→1', cat: 'activation', ph: 'X', ts: 0, dur: 5, pid: 0, tid: 1, args: { dst: 'x' } }],
        /send event: field "dst" must be an integer from -1 to 1023/,
      ],
      [
        'object title',
        { traceEvents: [], metadata: { title: { x: 1 } } },
        /metadata\.title must be a string, got \{"x":1\}/,
      ],
      [
        'a task started twice',
        [X({}), X({}, { ts: 5000 })],
        /: F0 starts at 5 ms while it is still running \(started at 0 ms\)/,
      ],
      [
        'an end without its start',
        { traceEvents: [], metadata: { baton_events: [end({})] } },
        /task-end of F0 at 1 ms without its task-start/,
      ],
    ];
    for (const [what, json, re] of cases) {
      const f = write('bad.json', json);
      for (const argv of [
        ['summary', f],
        ['gantt', f, '-o', svg],
      ]) {
        const r = await call(...argv);
        assert.equal(r.code, 2, `${what}: ${argv[0]} exits 2 (${r.err})`);
        assert.match(r.err, re, `${what}: ${argv[0]}`);
        assert.doesNotMatch(r.err, /TypeError| {4}at /, `${what}: ${argv[0]} names the problem, not an internal error`);
      }
      assert.ok(!fs.existsSync(svg), `${what}: no chart written`);
    }
  });

  it('reads metadata events of any name, and refuses a file that is not a regular file', async () => {
    const odd = path.join(dir, 'odd-names.json');
    fs.writeFileSync(
      odd,
      JSON.stringify([
        { name: 'constructor', ph: 'M', pid: 0, tid: 0 },
        { name: '__proto__', ph: 'M', pid: 0, tid: 0 },
      ]),
    );
    assert.equal((await call('check', odd)).code, 0);
    const dev = await call('check', '/dev/zero');
    assert.equal(dev.code, 2);
    assert.match(dev.err, /cannot read "\/dev\/zero": not a regular file or a pipe/);
    // A pipe is read (up to the size limit).
    const fifo = path.join(dir, 'trace.fifo');
    execFileSync('mkfifo', [fifo]);
    const writer = spawn('sh', ['-c', `cat "$0" > "$1"`, file, fifo]);
    const piped = await call('summary', fifo, '--json');
    await new Promise((resolve) => writer.once('exit', resolve));
    assert.equal(piped.code, 0, piped.err);
    assert.deepEqual(JSON.parse(piped.out), JSON.parse((await call('summary', file, '--json')).out));
    const folder = await call('summary', dir);
    assert.equal(folder.code, 2);
    assert.match(folder.err, /it is a directory/);
  });

  it('says clearly when the file is missing or not JSON (exit 2); check answers invalid (exit 1, and JSON with --json)', async () => {
    const missing = await call('check', path.join(dir, 'nope.json'));
    assert.equal(missing.code, 2);
    assert.match(missing.err, /cannot read ".*nope\.json": ENOENT/);
    const notJson = path.join(dir, 'junk.json');
    fs.writeFileSync(notJson, '{"traceEvents": [');
    const junk = await call('summary', notJson);
    assert.equal(junk.code, 2);
    assert.match(junk.err, /junk\.json is not JSON/);
    const checked = await call('check', notJson, '--json');
    assert.equal(checked.code, 1);
    const answer = JSON.parse(checked.out) as { valid: boolean; problems: string[] };
    assert.equal(answer.valid, false);
    assert.match(answer.problems[0], /junk\.json is not JSON/);
    fs.writeFileSync(notJson, 'not json {\n  "a": 1\n');
    assert.equal((await call('summary', notJson)).err.trim().split('\n').length, 1, 'the error is one line');
  });

  it('lets no control character of a file reach the terminal: its job name, or its text quoted by a JSON error', async () => {
    const trace = JSON.parse(fs.readFileSync(file, 'utf8'));
    trace.metadata.job = 'x\u001b[2J\u009b31m';
    const evil = path.join(dir, 'evil.json');
    fs.writeFileSync(evil, JSON.stringify(trace));
    const summary = await call('summary', evil);
    assert.equal(summary.code, 0, summary.err);
    assert.match(summary.out, /^job x\\u001b\[2J\\u009b31m · 3 stages/);
    fs.writeFileSync(evil, '{"traceEvents": \u001b[2J\u001b[31mred}');
    const outs = [
      await call('summary', evil),
      await call('gantt', evil, '-o', path.join(dir, 'never.svg')),
      await call('check', evil),
    ];
    assert.deepEqual(
      outs.map((r) => r.code),
      [2, 2, 1],
    );
    for (const r of outs) {
      assert.match(r.out + r.err, /is not JSON: .*\\u001b\[2J/);
      assert.doesNotMatch(r.out + r.err, /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
    }
  });

  it('refuses to write the chart over its own input', async () => {
    const copy = path.join(dir, 'self.json');
    fs.copyFileSync(file, copy);
    for (const o of [copy, path.join(dir, '.', 'self.json')]) {
      const r = await call('gantt', copy, '-o', o);
      assert.equal(r.code, 2);
      assert.match(r.err, /trace gantt: -o .*self\.json is the trace being read/);
    }
    assert.deepEqual(fs.readFileSync(copy), fs.readFileSync(file));
  });

  it('draws the Gantt chart with the policy from the trace as the title', async () => {
    const svgFile = path.join(dir, 'run.svg');
    const r = await call('gantt', file, '-o', svgFile);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /wrote .*run\.svg \(36 tasks\)/);
    const svg = fs.readFileSync(svgFile, 'utf8');
    assert.ok(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"'));
    assert.equal((svg.match(/<rect class="task"/g) ?? []).length, 36);
    assert.match(svg, />1f1b · job demo<\/text>/);
    await call('gantt', file, '--output', svgFile, '--title', 'R&D <run>', '--width', '900');
    const titled = fs.readFileSync(svgFile, 'utf8');
    assert.match(titled, />R&amp;D &lt;run&gt;<\/text>/);
    assert.match(titled, /viewBox="0 0 900 /);
  });

  it('refuses gantt without -o and with two files (exit 2)', async () => {
    assert.equal((await call('gantt', file)).code, 2);
    const two = await call('gantt', file, file, '-o', 'x.svg');
    assert.equal(two.code, 2);
    assert.match(two.err, /expected one trace file/);
    assert.equal((await call('gantt', file, '-o', 'x.svg', '--width', 'wide')).code, 2);
    const narrow = await call('gantt', file, '-o', 'x.svg', '--width', '100');
    assert.equal(narrow.code, 2);
    assert.match(narrow.err, /--width must be 300 to 100000 px, got 100/);
    const wide = await call('gantt', file, '-o', 'x.svg', '--width', '9007199254740991');
    assert.equal(wide.code, 2);
    assert.match(wide.err, /--width must be 300 to 100000 px, got 9007199254740991/);
  });

  it('says what gantt wrote as JSON with --json', async () => {
    const svgFile = path.join(dir, 'json.svg');
    const r = await call('gantt', file, '-o', svgFile, '--json');
    assert.equal(r.code, 0, r.err);
    assert.deepEqual(JSON.parse(r.out), {
      output: svgFile,
      svg_bytes: fs.statSync(svgFile).size,
      tasks: 36,
      stages: 3,
      width: 1200,
    });
  });

  it('summarizes tasks, busy and wait time and messages per stage', async () => {
    const r = await call('summary', file, '--json');
    assert.equal(r.code, 0, r.err);
    const rows = JSON.parse(r.out) as StageSummary[];
    assert.deepEqual(
      rows.map((x) => x.stage),
      [0, 1, 2],
    );
    assert.deepEqual(
      rows.map((x) => x.tasks),
      [12, 12, 12],
    );
    assert.deepEqual(
      rows.map((x) => x.sent),
      [6, 12, 6],
      'edge stages send one way, the middle both',
    );
    assert.deepEqual(
      rows.map((x) => x.received),
      [6, 12, 6],
      'data-feed inputs are not messages',
    );
    for (const row of rows) {
      const mine = events.filter((e) => e.stage === row.stage);
      const busy =
        mine.filter((e) => e.type === 'task-end').reduce((a, e) => a + e.t, 0) -
        mine.filter((e) => e.type === 'task-start').reduce((a, e) => a + e.t, 0);
      assert.ok(Math.abs(row.busy_ms - busy) < 1e-6);
      const wait = mine.reduce((a, e) => a + (e.type === 'wait' ? e.ms : 0), 0);
      assert.ok(Math.abs(row.wait_ms - wait) < 1e-6);
    }
    const text = await call('summary', file);
    assert.match(text.out, /job demo · 3 stages/);
    assert.match(text.out, /stage\s+tasks\s+busy ms\s+wait ms\s+sent\s+received/);
  });

  it('prints help for the command and each subcommand, and rejects unknown subcommands', async () => {
    const top = await call('--help');
    assert.equal(top.code, 0);
    assert.equal(top.out, TRACE_HELP);
    for (const sub of ['gantt', 'check', 'summary']) {
      const h = await call(sub, '--help');
      assert.equal(h.code, 0);
      assert.match(h.out, new RegExp(`^baton trace ${sub} — `));
    }
    for (const name of ['draw', 'constructor', '__proto__', 'hasOwnProperty']) {
      const bad = await call(name, file);
      assert.equal(bad.code, 2, bad.err);
      assert.match(bad.err, new RegExp(`unknown subcommand "${name}"`));
    }
    const none = await call();
    assert.equal(none.code, 2);
    // A usage error: nothing on stdout, where a script reading the answer would take the help for one.
    assert.equal(none.out, '');
    assert.match(none.err, /^baton trace: a subcommand is required\n\nbaton trace — /);
  });
});
