import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { simCommand } from '../cli/sim';
import { scheduleEvents } from '../cli/offline-gantt';
import { UsageError } from '../cli/args';
import { ScheduledTask } from '../checks/offline-reference';
import { TaskStartEvent } from '../stage/events';

const at = (stage: number, kind: 'F' | 'B' | 'W', mb: number, start: number, end: number): ScheduledTask => ({
  stage,
  task: { kind, mb, chunk: 0 },
  start,
  end,
});

describe('the offline reference drawn as a Gantt chart', () => {
  it('turns a schedule into task events in time order, each start with its in-flight count as a stage counts it', () => {
    // One stage: F0, F1, B0 (frees F0's slot at its end), F2, B1, B2.
    const sched = [
      at(0, 'B', 0, 20, 30),
      at(0, 'F', 0, 0, 10),
      at(0, 'F', 1, 10, 20),
      at(0, 'F', 2, 30, 40),
      at(0, 'B', 1, 40, 50),
      at(0, 'B', 2, 50, 60),
    ];
    const events = scheduleEvents(3, sched, false);
    assert.equal(events.length, 12);
    assert.ok(events.every((e) => e.iteration === 3));
    for (let i = 1; i < events.length; i++) assert.ok(events[i].t >= events[i - 1].t);
    // At t = 10 F0 ends before F1 starts.
    assert.deepEqual(
      events.filter((e) => e.t === 10).map((e) => e.type),
      ['task-end', 'task-start'],
    );
    const starts = events.filter((e): e is TaskStartEvent => e.type === 'task-start');
    assert.deepEqual(
      starts.map((e) => `${e.kind}${e.mb}:${e.inflight}`),
      ['F0:1', 'F1:2', 'B0:2', 'F2:2', 'B1:2', 'B2:1'],
    );
    // With a split backward W frees the slot, not B.
    const split = scheduleEvents(
      0,
      [at(0, 'F', 0, 0, 1), at(0, 'B', 0, 1, 2), at(0, 'W', 0, 2, 3), at(0, 'F', 1, 3, 4)],
      true,
    );
    assert.deepEqual(
      split.filter((e): e is TaskStartEvent => e.type === 'task-start').map((e) => e.inflight),
      [1, 1, 1, 1],
    );
  });

  it('sim --reference offline --gantt draws the reference beside the run, one per compared policy, on the run axis', async function () {
    this.timeout(60000);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-offline-gantt-'));
    try {
      const flags = ['--stages', '3', '--microbatches', '6', '--profile', 'llm', '--jitter', 'paper', '--seed', '2'];
      const g = path.join(dir, 'g.svg');
      let text = '';
      await simCommand(
        [...flags, '--buffer-limit', '2', '--reference', 'offline', '--gantt', g, '--json'],
        (x) => (text = x),
      );
      const j = JSON.parse(text);
      const svg = fs.readFileSync(path.join(dir, 'g.offline.svg'), 'utf8');
      assert.equal((svg.match(/<rect class="task"/g) ?? []).length, 3 * 6 * 2);
      assert.match(
        svg,
        new RegExp(
          `offline reference for bf, iteration 0: ${j.offline_ms.toFixed(1)} ms \\(bf took ${j.makespan_ms.toFixed(1)} ms\\)`,
        ),
      );
      text = '';
      await simCommand(
        [...flags, '--compare', 'bf,fb', '--reference', 'offline', '--gantt', g],
        (x) => (text += `${x}\n`),
      );
      assert.match(text, /wrote .*g\.offline\.svg/);
      assert.match(text, /wrote .*g\.fb\.offline\.svg/);
      assert.match(
        fs.readFileSync(path.join(dir, 'g.fb.offline.svg'), 'utf8'),
        /offline reference for fb, iteration 0/,
      );
      // Without the reference, no such chart.
      fs.rmSync(path.join(dir, 'g.offline.svg'));
      await simCommand([...flags, '--gantt', g], () => undefined);
      assert.ok(!fs.existsSync(path.join(dir, 'g.offline.svg')));
      // Its path is checked before the run, as the chart's own is.
      fs.mkdirSync(path.join(dir, 'g.offline.svg'));
      await assert.rejects(
        simCommand([...flags, '--reference', 'offline', '--gantt', g], () => undefined),
        (e: Error) =>
          e instanceof UsageError &&
          /--gantt \(its offline-reference chart\) .*g\.offline\.svg: is a directory/.test(e.message),
      );
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
