// Benchmark of the runtime's own cost on the real clock (run: npm run bench -- overhead
// [--stages 2,4,8] [--rounds R (default 5)] [--microbatches M (default 32)]
// [--no-realtime] [--json]). The `uniform` profile (F = 10 ms, B = 20 ms, free
// communication), no jitter, bf, one OS process per stage over a local nats-server: the
// ideal makespan is (M+P−1)(F+B), and the overhead is the measured makespan (mean of 3
// iterations after a warm-up) over it. Each round measures every P in the default
// scheduling class and, where the OS allows it (`chrt -r 1`: root or CAP_SYS_NICE), in the
// real-time class, one after the other, so both see the same machine. Every measurement
// is its own process (the launcher, its nats-server and its stage processes), so the
// real-time runs put all of them in that class.
// Also where the overhead goes along the critical path: the coordinator's begin to stage
// 0's first task, the fill (last stage's first start over (P−1)F), the last stage's
// summed overruns over M(F+B), the drain (stage 0's last end over the last stage's last
// end plus (P−1)B), and stage 0's last end to the coordinator's last report.
// And, in the same rounds and in each class, the floor: the same pipeline with no Baton
// code in it (bench/bare-pipeline.ts: Node, nats.js through one nats-server, the same
// timer). Its overhead is the floor of that design; what Baton takes over it, paired per
// round, is Baton's own.

import { spawnSync } from 'child_process';
import { childJson } from './child-json';
import { resolveConfig } from '../job/config';
import { JobResult } from '../job/run-local';
import { mean, median } from '../checks/stats';
import { formatTable } from '../cli/table';
import { runOnce } from '../cli/run';
import { loadProfile } from '../models/profile';
import { benchMain, positiveInt } from './bench-cli';
import { UsageError } from '../cli/args';
import { inTurn } from './in-turn';
import { FLOOR_FLAG } from './bare-pipeline';

export interface OverheadParts {
  start: number;
  fill: number;
  last_stage: number;
  drain: number;
  report: number;
}
const PARTS: readonly (keyof OverheadParts)[] = ['start', 'fill', 'last_stage', 'drain', 'report'];

interface Measurement {
  makespan_ms: number;
  ideal_ms: number;
  parts: OverheadParts;
}
type Class = 'normal' | 'realtime';

/** Per-task F and B of the uniform profile (read from it, so the bench follows the file). */
function uniformCosts(): { F: number; B: number } {
  const p = loadProfile('uniform');
  const F = p.layers.reduce((a, l) => a + l.forwardMs * l.count, 0);
  return { F, B: F * p.backwardRatio };
}

/** The overhead of each measured iteration, split along the critical path (means). */
export function criticalPathSplit(result: JobResult, P: number, M: number, F: number, B: number): OverheadParts {
  const rows = result.records.map((rec) => {
    const ev = result.events.filter((e) => e.iteration === rec.iteration);
    const times = (stage: number, type: 'task-start' | 'task-end') =>
      ev.filter((e) => e.stage === stage && e.type === type).map((e) => e.t);
    const first0 = Math.min(...times(0, 'task-start'));
    const firstLast = Math.min(...times(P - 1, 'task-start'));
    const endLast = Math.max(...times(P - 1, 'task-end'));
    const end0 = Math.max(...times(0, 'task-end'));
    return {
      start: first0 - rec.start,
      fill: firstLast - first0 - (P - 1) * F,
      last_stage: endLast - firstLast - M * (F + B),
      drain: end0 - endLast - (P - 1) * B,
      report: rec.end - end0,
    };
  });
  return Object.fromEntries(PARTS.map((k) => [k, mean(rows.map((r) => r[k]))])) as unknown as OverheadParts;
}

/** One measurement in this process (the child side). */
async function measure(P: number, M: number): Promise<Measurement> {
  const { F, B } = uniformCosts();
  const cfg = resolveConfig({
    job: `overhead${process.pid}p${P}`,
    stages: P,
    microbatches: M,
    iterations: 3,
    warmupIterations: 1,
    policy: 'bf',
    profile: 'uniform',
    jitter: 'none',
  });
  const { result } = await runOnce(cfg, { transport: 'nats', processes: 'per-stage' });
  return {
    makespan_ms: mean(result.records.map((r) => r.makespan)),
    ideal_ms: (M + P - 1) * (F + B),
    parts: criticalPathSplit(result, P, M, F, B),
  };
}

/** A node script run as its own process tree, all of it in the real-time class if asked; its JSON. */
function nodeChildJson(argv: readonly string[], realtime: boolean, what: string): Promise<unknown> {
  const node = [process.execPath, ...argv];
  const [cmd, ...args] = realtime ? ['chrt', '-r', '1', ...node] : node;
  return childJson(cmd, args, `${what}${realtime ? ' under chrt -r 1' : ''}`);
}

function measureInChild(P: number, M: number, realtime: boolean): Promise<Measurement> {
  return nodeChildJson(
    [__filename, '--child', String(P), String(M)],
    realtime,
    `measurement P=${P}`,
  ) as Promise<Measurement>;
}

/** One measurement of the no-Baton floor. */
function measureFloorInChild(P: number, M: number, realtime: boolean): Promise<{ makespan_ms: number }> {
  const { F, B } = uniformCosts();
  return nodeChildJson(
    [require.resolve('./bare-pipeline'), FLOOR_FLAG, String(P), String(M), String(F), String(B)],
    realtime,
    `floor measurement P=${P}`,
  ) as Promise<{ makespan_ms: number }>;
}

/** True when this process may start children in the real-time class. */
export function realtimeAllowed(): boolean {
  const r = spawnSync('chrt', ['-r', '1', 'true'], { stdio: 'ignore' });
  return r.status === 0;
}

export async function benchRunOverhead(
  o: { stages?: number[]; rounds?: number; microbatches?: number; realtime?: boolean } = {},
) {
  const stages = o.stages ?? [2, 4, 8];
  const rounds = o.rounds ?? 5;
  const M = o.microbatches ?? 32;
  for (const P of stages)
    if (!Number.isInteger(P) || P < 2) throw new Error(`--stages: each P must be an integer >= 2, got ${P}`);
  // A depth listed twice would be measured twice a round into the same figures (2R runs under "medians of R rounds").
  if (new Set(stages).size !== stages.length)
    throw new UsageError(`--stages must list each depth once, got ${stages.join(',')}`);
  if (!Number.isInteger(rounds) || rounds < 1) throw new Error(`--rounds must be a positive integer, got ${rounds}`);
  if (!Number.isInteger(M) || M < 1) throw new Error(`--microbatches must be a positive integer, got ${M}`);
  const realtime = o.realtime !== false && realtimeAllowed();
  const classes: readonly Class[] = realtime ? ['normal', 'realtime'] : ['normal'];
  const runs: Record<string, Record<Class, { baton: Measurement[]; floor: number[] }>> = {};
  for (const P of stages) runs[P] = { normal: { baton: [], floor: [] }, realtime: { baton: [], floor: [] } };
  for (let r = 0; r < rounds; r++) {
    for (const P of stages) {
      // Every round measures each class's Baton run and floor; odd rounds in reverse order,
      // so a drift over the round does not favour one of them.
      const steps = classes.flatMap((c) => [
        async () => runs[P][c].baton.push(await measureInChild(P, M, c === 'realtime')),
        async () => runs[P][c].floor.push((await measureFloorInChild(P, M, c === 'realtime')).makespan_ms),
      ]);
      for (const step of inTurn(steps, r)) await step();
    }
  }
  const summarize = (m: { baton: Measurement[]; floor: number[] }) => {
    if (m.baton.length === 0) return null;
    const ideal = m.baton[0].ideal_ms;
    const over = m.baton.map((x, i) => x.makespan_ms - m.floor[i]);
    return {
      makespans_ms: m.baton.map((x) => x.makespan_ms),
      median_ms: median(m.baton.map((x) => x.makespan_ms)),
      median_overhead: median(m.baton.map((x) => x.makespan_ms / x.ideal_ms - 1)),
      parts_ms: Object.fromEntries(
        PARTS.map((k) => [k, median(m.baton.map((x) => x.parts[k]))]),
      ) as unknown as OverheadParts,
      floor: {
        makespans_ms: m.floor,
        median_ms: median(m.floor),
        median_overhead: median(m.floor.map((x) => x / ideal - 1)),
      },
      /** Baton's makespan minus the floor's, paired per round: median, least and most. */
      over_floor_ms: { median: median(over), min: Math.min(...over), max: Math.max(...over) },
    };
  };
  const { F, B } = uniformCosts();
  return {
    microbatches: M,
    rounds,
    realtime_measured: realtime,
    forward_ms: F,
    backward_ms: B,
    stages: stages.map((P) => ({
      stages: P,
      ideal_ms: runs[P].normal.baton[0].ideal_ms,
      normal: summarize(runs[P].normal)!,
      realtime: summarize(runs[P].realtime),
    })),
  };
}

export function formatRunOverhead(r: Awaited<ReturnType<typeof benchRunOverhead>>): string {
  const pct = (x: number) => `${x >= 0 ? '+' : ''}${(100 * x).toFixed(1)}%`;
  const signed = (x: number) => `${x >= 0 ? '+' : ''}${x.toFixed(1)}`;
  const rows = r.stages.map((s) => [
    String(s.stages),
    s.ideal_ms.toFixed(0),
    s.normal.median_ms.toFixed(1),
    pct(s.normal.median_overhead),
    ...(r.realtime_measured ? [s.realtime!.median_ms.toFixed(1), pct(s.realtime!.median_overhead)] : []),
  ]);
  const table = formatTable(
    ['P', 'ideal ms', 'makespan ms', 'overhead', ...(r.realtime_measured ? ['chrt -r 1 ms', 'overhead'] : [])],
    rows,
    `uniform F=${r.forward_ms} B=${r.backward_ms}, no jitter, bf, M=${r.microbatches}, one process per stage over NATS; medians of ${r.rounds} rounds${r.realtime_measured ? ', default and real-time class alternating' : ' (real-time class not permitted here, or --no-realtime)'}`,
  );
  const byClass = (s: (typeof r.stages)[number]) =>
    [['default', s.normal], ...(s.realtime ? [['chrt -r 1', s.realtime] as const] : [])] as [
      string,
      NonNullable<typeof s.realtime>,
    ][];
  const floor = formatTable(
    ['P', 'class', 'floor ms', 'overhead', 'Baton - floor ms', 'least', 'most'],
    r.stages.flatMap((s) =>
      byClass(s).map(([name, x]) => [
        String(s.stages),
        name,
        x.floor.median_ms.toFixed(1),
        pct(x.floor.median_overhead),
        signed(x.over_floor_ms.median),
        signed(x.over_floor_ms.min),
        signed(x.over_floor_ms.max),
      ]),
    ),
    'the same pipeline with no Baton code in it (raw nats.js through one nats-server, the same timer; bench/bare-pipeline.ts), measured in the same rounds and class; Baton - floor paired per round',
  );
  const split = formatTable(
    ['P', 'class', ...PARTS.map((k) => `${k.replace('_', ' ')} ms`)],
    r.stages.flatMap((s) =>
      byClass(s).map(([name, x]) => [String(s.stages), name, ...PARTS.map((k) => x.parts_ms[k].toFixed(1))]),
    ),
    'where the overhead goes along the critical path (per iteration, medians of the rounds)',
  );
  return `${table}\n\n${floor}\n\n${split}`;
}

if (require.main === module) {
  const argv = process.argv.slice(2);
  if (argv[0] === '--child') {
    measure(Number(argv[1]), Number(argv[2])).then(
      (m) => process.stdout.write(JSON.stringify(m)),
      (e) => {
        process.stderr.write(`${(e as Error).message}\n`);
        process.exitCode = 1;
      },
    );
  } else {
    benchMain(
      'overhead',
      "the runtime's overhead on the real clock against (M+P-1)(F+B), default and real-time scheduling class side by side, split along the critical path, and the same pipeline with no Baton code in it (the floor of the design on this machine)",
      [
        { name: 'stages', type: 'list', metavar: 'P,…', help: 'pipeline depths', default: '2,4,8' },
        { name: 'rounds', type: 'int', metavar: 'R', help: 'rounds (medians are reported)', default: 5 },
        { name: 'microbatches', type: 'int', metavar: 'M', help: 'microbatches per iteration', default: 32 },
        { name: 'no-realtime', type: 'bool', help: 'measure the default scheduling class only' },
      ],
      async (flags) => {
        const given = flags.stages as string[];
        if (given.some((p) => !/^\d+$/.test(p) || Number(p) < 2 || Number(p) > 64))
          throw new UsageError(`--stages must list integers from 2 to 64, got ${given.join(',')}`);
        const stages = given.map(Number);
        const r = await benchRunOverhead({
          stages,
          rounds: positiveInt(flags, 'rounds'),
          microbatches: positiveInt(flags, 'microbatches'),
          realtime: !flags.noRealtime,
        });
        return flags.json ? r : formatRunOverhead(r);
      },
    );
  }
}
