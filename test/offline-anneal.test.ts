import { strict as assert } from 'assert';
import { makeDurationModel } from '../models/durations';
import { lowerBound } from '../checks/lower-bound';
import { ROUND_GAP } from '../checks/offline-reference';
import { listSchedule } from '../checks/offline-schedule';
import { justify } from '../checks/offline-justify';
import { stageOrdersOf, tabuSearch } from '../checks/offline-tabu';
import { anneal } from '../checks/offline-anneal';
import { OrderTiming } from '../checks/offline-order-timing';
import { inflightCaps } from '../checks/slot-bound';
import { loadProfile } from '../models/profile';
import { bf } from '../policies/hints';
import { PipelineShape } from '../policies/task';
import { simCommand } from '../cli/sim';
import {
  assertLeavesUnsearchableAlone,
  assertRunsOnlyAboveGap,
  graphOf,
  paperInstances,
  scheduleOf,
  scheduleProblems,
  stream,
} from './helpers-offline';

const llm = loadProfile('llm');

describe('offline annealing over stage orders', () => {
  it('re-times only what a change can move, exactly as timing the changed orders from scratch', () => {
    const shape: PipelineShape = { stages: 4, chunks: 1, microbatches: 12, splitBackward: false };
    const g = graphOf(shape, 3, makeDurationModel({ profile: llm, shape, jitter: 'paper', seed: 1 }));
    const r = listSchedule(g, g.rest);
    const t = new OrderTiming(g, stageOrdersOf(g, r.start));
    assert.ok(Math.abs(t.timeAll() - r.makespan) < 1e-9);
    const random = stream(5);
    let accepted = 0,
      cut = 0,
      cycles = 0;
    for (let k = 0; k < 3000; k++) {
      const s = Math.floor(random() * shape.stages);
      const [lo, hi] = [t.offset[s], t.offset[s + 1]];
      const a = lo + Math.floor(random() * (hi - lo)),
        b = lo + Math.floor(random() * (hi - lo));
      if (a === b) continue;
      const from = Math.min(t.start[t.order[a]], t.start[t.order[b]]);
      // Exchange the tasks at places a and b (any kinds: a cycle or any timing must come out right).
      const swap = () => {
        [t.order[a], t.order[b]] = [t.order[b], t.order[a]];
        t.reindex();
      };
      swap();
      const threshold = random() < 0.5 ? Infinity : t.makespan * (1 + 0.02 * random());
      const part = t.retime(from, threshold);
      const whole = new OrderTiming(
        g,
        Array.from({ length: shape.stages }, (_, x) => t.order.slice(t.offset[x], t.offset[x + 1])),
      ).timeAll();
      if (part < Infinity) assert.ok(Math.abs(part - whole) < 1e-9, `step ${k}: ${part} in part, ${whole} whole`);
      else if (whole < Infinity) {
        assert.ok(whole > threshold, `step ${k}: cut at ${threshold} though it takes ${whole}`);
        cut++;
      } else cycles++;
      if (part <= t.makespan * 1.01) {
        t.accept();
        accepted++;
      } else {
        t.reject();
        swap();
      }
    }
    // The accepted timing is what timing its orders from scratch gives.
    const again = new OrderTiming(
      g,
      Array.from({ length: shape.stages }, (_, x) => t.order.slice(t.offset[x], t.offset[x + 1])),
    );
    again.timeAll();
    assert.deepEqual(again.start, t.start);
    assert.ok(accepted > 50 && cut > 50 && cycles > 50, `accepted ${accepted}, cut ${cut}, cycles ${cycles}`);
  });

  it('keeps a schedule valid and at or above the bound, never makes it longer, and shortens some that the tabu search left', function () {
    this.timeout(120000);
    let shorter = 0,
      checked = 0;
    for (const { shape, limit, d, g, what } of paperInstances([
      [{ stages: 4, chunks: 1, microbatches: 12, splitBackward: false }, [1, 2, 3, 'depth']],
      [{ stages: 3, chunks: 1, microbatches: 8, splitBackward: true }, [1, 2, 'depth']],
    ])) {
      const r = listSchedule(g, g.rest);
      const j = justify(g, r.start, r.makespan);
      const t = tabuSearch(g, j.start, j.makespan, stream(), { steps: 300 });
      const a = anneal(g, t.start, t.makespan, stream(1), { steps: 20000 });
      const caps = inflightCaps(bf, shape, limit);
      const sched = scheduleOf(g, a.start);
      assert.deepEqual(scheduleProblems(shape, d, caps, sched), [], what);
      assert.equal(a.makespan, Math.max(...sched.map((x) => x.end)), what);
      assert.ok(a.makespan <= t.makespan, `${what}: ${a.makespan} > ${t.makespan}`);
      const bound = lowerBound(shape, 0, d, caps).bound;
      assert.ok(a.makespan >= bound * (1 - 1e-12), `${what}: ${a.makespan} < bound ${bound}`);
      if (a.makespan < t.makespan) shorter++;
      checked++;
    }
    assert.equal(checked, 21);
    assert.ok(shorter > 0, 'no schedule was shortened');
    console.log(`      (${shorter} of ${checked} tabu-searched schedules shortened)`);
  });

  it('reports its progress at each tenth of its moves, without changing what it finds', () => {
    const [{ g, what }] = paperInstances([[{ stages: 4, chunks: 1, microbatches: 12, splitBackward: false }, [2]]]);
    const r = listSchedule(g, g.rest);
    const quiet = anneal(g, r.start, r.makespan, stream(1), { steps: 20000 });
    const calls: [number, number, number][] = [];
    const told = anneal(g, r.start, r.makespan, stream(1), {
      steps: 20000,
      onProgress: (done, of, best) => calls.push([done, of, best]),
    });
    assert.deepEqual(told, quiet, what);
    assert.deepEqual(
      calls.map(([done, of]) => [done, of]),
      Array.from({ length: 10 }, (_, i) => [2000 * (i + 1), 20000]),
    );
    assert.ok(
      calls.every(([, , best], i) => best <= (i === 0 ? r.makespan : calls[i - 1][2])),
      'the best makespan never rises',
    );
    assert.equal(calls[9][2], told.makespan);
    assert.ok(told.makespan < r.makespan, `${what}: the instance is one the annealing shortens`);
  });

  it('leaves a schedule alone when its stage orders break the limit, and interleaved stages alone', () => {
    assertLeavesUnsearchableAlone((g, start, makespan) => anneal(g, start, makespan, stream()));
  });

  it('runs in the offline reference only above ROUND_GAP times the bound, and never makes it worse', function () {
    this.timeout(60000);
    assertRunsOnlyAboveGap('annealing', (on) => ({ tabuSteps: 100, annealSteps: on ? 20000 : 0 }));
  });

  it('sim --reference-anneal sets its moves (0 skips it) and is refused without --reference offline or below 0', async function () {
    this.timeout(60000);
    // This instance's reference stays above ROUND_GAP times its bound before the annealing (1.056).
    const flags =
      '--stages 4 --microbatches 12 --profile multimodal --jitter paper --buffer-limit 2 --seed 1 --reference offline --json'.split(
        ' ',
      );
    const sim = async (...more: string[]) => {
      let text = '';
      await simCommand([...flags, ...more], (x) => (text = x));
      return JSON.parse(text) as { offline_ms: number; offline_evaluations: number; lower_bound_ms: number };
    };
    const none = await sim('--reference-anneal', '0'),
      some = await sim('--reference-anneal', '30000');
    assert.ok(none.offline_ms > none.lower_bound_ms * ROUND_GAP, `${none.offline_ms} vs ${none.lower_bound_ms}`);
    assert.ok(some.offline_evaluations > none.offline_evaluations + 10000, `${some.offline_evaluations}`);
    assert.ok(some.offline_ms < none.offline_ms, `${some.offline_ms} >= ${none.offline_ms}`);
    await assert.rejects(
      simCommand(['--reference-anneal', '5'], () => {}),
      /give it with --reference offline/,
    );
    await assert.rejects(
      simCommand(['--reference', 'offline', '--reference-anneal', '-1'], () => {}),
      /0 or more moves/,
    );
  });
});
