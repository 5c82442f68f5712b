// Benchmark of the speed-aware partition on nodes that really differ (run: npm run bench --
// hetero-real [--rounds R] [--fast-cpus F] [--slow-cpus C] [--layers L] [--json]; root: it
// makes cgroups). Two `baton node` agents on a private nats-server, each in a cgroup of its
// own with a CPU quota (bench/cpu-quota.ts): the fast one F CPUs (default 0.4), the slow one
// C (default 0.15). The cgroups' raised weight lets each get its quota on a machine busy
// with other work, so the quotas, not the machine's load, make one node slower (the two
// take at most F + C CPUs from the others). Both agents have one BLAS thread.
// Each agent measures its own speed inside its limits when it starts (the reference stage's
// F+B, GFLOP/s, in its baton-node INFO; `baton nodes --json` reads them back). Then a GPT
// is trained on the two agents (`train --nodes fast,slow`, no speeds given: the launcher
// reads the agents' measured speeds through the services API and places the heavier stage
// on the faster agent), with the layers split evenly (`--partition uniform`) and in
// proportion to the measured speeds (`--partition speed`), in turn for R rounds (uniform
// first in even rounds); each round's ratio of tokens/s (median over its iterations but
// the first, the wasm tier-up), and the median ratio over the rounds.
//
// The ideal the calibrated speeds predict: a pipeline's steady rate is set by its slowest
// stage, FLOPs / speed. Uniform: max over stages of the uniform split's FLOPs / its node's
// speed; ideal: all FLOPs / the summed speeds (a continuous split). Their ratio is the
// speedup a perfect speed-aware partition would give; the split the partitioner can make
// (whole blocks) predicts its own. Not modelled: the bubble, messaging, the nodes sharing
// the machine's memory bandwidth and the other load on the machine.

import { spawnSync } from 'child_process';
import { mkdtempSync, rmSync } from 'fs';
import { loadavg, tmpdir } from 'os';
import { join } from 'path';
import { median } from '../checks/stats';
import { formatTable } from '../cli/table';
import { CLI_ENTRY } from '../cli/run';
import { UsageError } from '../cli/args';
import { TRAIN_DEFAULTS } from '../job/defaults';
import { TrainConfig, corpusFor, modelSpecFor, tokensPerMicrobatch } from '../models/train-config';
import { planPartition } from '../models/partition';
import { startNatsServer } from '../transport/nats-server';
import { childJson } from './child-json';
import { benchMain, positiveInt } from './bench-cli';
import { inTurn } from './in-turn';
import { CpuQuota, makeCpuQuota } from './cpu-quota';
import { AgentProcess, measuredSpeeds, startAgent } from './agent-process';

export const HETERO_REAL_DEFAULTS = {
  rounds: 3,
  iterations: 4,
  microbatches: 8,
  layers: 8,
  fastCpus: 0.4,
  slowCpus: 0.15,
  calibrateMs: 1500,
} as const;

function benchModel(layers: number, iterations: number): TrainConfig {
  return {
    ...TRAIN_DEFAULTS,
    model: 'gpt',
    microbatchSize: 8,
    seq: 64,
    layers,
    width: 64,
    heads: 4,
    totalIterations: iterations,
    valBatches: 1,
  };
}

/** Wraps a command to run as a node runs: in its cgroup. */
type Runner = (cmd: string, args: readonly string[]) => [string, string[]];

interface TrainRun {
  tokensPerS: number;
  placement: string[];
  stageSpeeds: number[];
  checksum: string;
}

async function trainOnAgents(
  t: TrainConfig,
  o: { url: string; keyFile: string; nodes: string[]; partition: string; microbatches: number },
): Promise<TrainRun> {
  const args = [
    CLI_ENTRY,
    'train',
    ...['--transport', 'nats', '--nats', o.url, '--nodes', o.nodes.join(','), '--node-key-file', o.keyFile],
    ...['--placement', 'auto', '--partition', o.partition],
    ...['--model', 'gpt', '--stages', '2', '--microbatches', String(o.microbatches)],
    ...['--microbatch-size', String(t.microbatchSize), '--seq', String(t.seq), '--layers', String(t.layers)],
    ...['--width', String(t.width), '--heads', String(t.heads), '--iterations', String(t.totalIterations)],
    ...['--val-batches', '1', '--quiet', '--json'],
  ];
  const r = (await childJson(process.execPath, args, `baton train --partition ${o.partition}`)) as {
    iterations: { makespan_ms: number }[];
    placement: string[];
    stage_speeds: number[] | null;
    param_checksum: string;
  };
  if (!r.stage_speeds) throw new Error("baton train did not place the stages on the agents' measured speeds");
  const tokens = o.microbatches * tokensPerMicrobatch(t);
  return {
    tokensPerS: median(r.iterations.slice(1).map((x) => tokens / (x.makespan_ms / 1000))),
    placement: r.placement,
    stageSpeeds: r.stage_speeds,
    checksum: r.param_checksum,
  };
}

/** Each stage's FLOPs per sample under the partition by `weights` (uniform without). */
function stageFlops(t: TrainConfig, weights?: readonly number[]): number[] {
  const plan = planPartition(modelSpecFor(t, corpusFor(t).vocabSize), { stages: 2, weights });
  const flops = [0, 0];
  for (const v of plan.virtual) flops[v.stage] += v.flopsPerSample;
  return flops;
}

/** What the calibrated speeds predict: each partition's slowest stage, FLOPs / speed, and the ideal. */
export function predictedRates(flops: { uniform: number[]; speed: number[] }, speeds: readonly number[]) {
  const bottleneck = (f: number[]) => Math.max(...f.map((x, s) => x / speeds[s]));
  const ideal = flops.uniform.reduce((a, b) => a + b, 0) / speeds.reduce((a, b) => a + b, 0);
  const uniform = bottleneck(flops.uniform);
  return { idealRatio: uniform / ideal, splitRatio: uniform / bottleneck(flops.speed) };
}

interface Setup {
  url: string;
  keyFile: string;
  nodes: string[];
  speeds: number[];
  calibration: { node: string; cpus: string; stage_gflops: number; matmul_gflops: number }[];
}

async function rounds(t: TrainConfig, s: Setup, count: number, microbatches: number) {
  const out: { round: number; uniform: TrainRun; speed: TrainRun; ratio: number }[] = [];
  for (let r = 0; r < count; r++) {
    const runs: Partial<Record<'uniform' | 'speed', TrainRun>> = {};
    for (const partition of inTurn(['uniform', 'speed'] as const, r))
      runs[partition] = await trainOnAgents(t, { ...s, partition, microbatches });
    out.push({
      round: r,
      uniform: runs.uniform!,
      speed: runs.speed!,
      ratio: runs.speed!.tokensPerS / runs.uniform!.tokensPerS,
    });
  }
  return out;
}

export async function benchHeteroReal(o: {
  rounds?: number;
  layers?: number;
  fastCpus?: number;
  slowCpus?: number;
  iterations?: number;
}) {
  const D = HETERO_REAL_DEFAULTS;
  const t = benchModel(o.layers ?? D.layers, o.iterations ?? D.iterations);
  const cpus = [o.fastCpus ?? D.fastCpus, o.slowCpus ?? D.slowCpus];
  const loadBefore = loadavg()[0];
  const dir = mkdtempSync(join(tmpdir(), 'baton-hetero-'));
  const keyFile = join(dir, 'key');
  const server = await startNatsServer();
  const quotas: CpuQuota[] = [];
  const agents: AgentProcess[] = [];
  try {
    const key = spawnSync(process.execPath, [CLI_ENTRY, 'auth', 'key', keyFile], { encoding: 'utf8' });
    if (key.status !== 0) throw new Error(`baton auth key: ${key.stderr}`);
    const nodes = [`hr-fast-${process.pid}`, `hr-slow-${process.pid}`];
    for (let k = 0; k < 2; k++) quotas.push(makeCpuQuota(`baton-${nodes[k]}`, cpus[k]));
    const runners: Runner[] = quotas.map((q) => (cmd, args) => q.wrap(cmd, args));
    // One at a time: each measures itself on start, and should not share the CPUs with the other's measurement.
    for (let k = 0; k < 2; k++)
      agents.push(
        await startAgent(runners[k], {
          url: server.url,
          keyFile,
          name: nodes[k],
          timeoutMs: 120_000,
          service: { calibrateMs: D.calibrateMs },
        }),
      );
    const cal = await measuredSpeeds(server.url, nodes);
    const s: Setup = {
      url: server.url,
      keyFile,
      nodes,
      speeds: cal.map((c) => c.gflops_stage),
      calibration: cal.map((c, k) => ({
        node: nodes[k],
        cpus: `${cpus[k]} (${quotas[k].how})`,
        stage_gflops: c.gflops_stage,
        matmul_gflops: c.gflops_matmul,
      })),
    };
    const measured = await rounds(t, s, o.rounds ?? D.rounds, D.microbatches);
    const stageSpeeds = measured[0].speed.stageSpeeds;
    const predicted = predictedRates({ uniform: stageFlops(t), speed: stageFlops(t, stageSpeeds) }, stageSpeeds);
    const ratios = measured.map((m) => m.ratio);
    const medianRatio = median(ratios);
    return {
      model: {
        layers: t.layers,
        width: t.width,
        seq: t.seq,
        microbatch_size: t.microbatchSize,
        microbatches: D.microbatches,
      },
      calibration: s.calibration,
      speed_ratio: s.speeds[0] / s.speeds[1],
      placement: measured[0].speed.placement,
      rounds: measured,
      median_ratio: medianRatio,
      ratio_range: [Math.min(...ratios), Math.max(...ratios)],
      predicted_ideal_ratio: predicted.idealRatio,
      predicted_split_ratio: predicted.splitRatio,
      of_ideal: medianRatio / predicted.idealRatio,
      load: { before: loadBefore, after: loadavg()[0] },
    };
  } finally {
    for (const a of agents) await a.stop();
    for (const q of quotas) q.remove();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

type Result = Awaited<ReturnType<typeof benchHeteroReal>>;

export function formatHeteroReal(r: Result): string {
  const cal = formatTable(
    ['node', 'CPUs', 'stage F+B GFLOP/s', 'matMul GFLOP/s'],
    r.calibration.map((c) => [c.node, c.cpus, c.stage_gflops.toFixed(2), c.matmul_gflops.toFixed(2)]),
    `measured by each agent inside its limits: fast/slow ${r.speed_ratio.toFixed(2)}x`,
  );
  const runs = formatTable(
    ['round', 'uniform tok/s', 'speed-aware tok/s', 'ratio'],
    r.rounds.map((m) => [
      String(m.round),
      m.uniform.tokensPerS.toFixed(0),
      m.speed.tokensPerS.toFixed(0),
      `${m.ratio.toFixed(2)}x`,
    ]),
    `GPT ${r.model.layers} blocks, d ${r.model.width}, seq ${r.model.seq}, ${r.model.microbatches}x${r.model.microbatch_size} sequences; stages on ${r.placement.join(', ')}`,
  );
  return [
    cal,
    runs,
    `median ratio ${r.median_ratio.toFixed(2)}x (range ${r.ratio_range.map((x) => x.toFixed(2)).join('-')}, ${r.rounds.length} rounds)`,
    `predicted by the measured speeds: ideal ${r.predicted_ideal_ratio.toFixed(2)}x, the partitioner's whole-block split ${r.predicted_split_ratio.toFixed(2)}x; measured ${(100 * r.of_ideal).toFixed(0)}% of ideal`,
    `load average ${r.load.before.toFixed(1)} before, ${r.load.after.toFixed(1)} after (2 cores shared)`,
  ].join('\n\n');
}

if (require.main === module)
  benchMain(
    'hetero-real',
    'uniform against speed-aware partition of a GPT trained on two node agents, one slowed by a cgroup CPU quota (root)',
    [
      { name: 'rounds', type: 'int', metavar: 'R', help: `rounds (default ${HETERO_REAL_DEFAULTS.rounds})` },
      { name: 'layers', type: 'int', metavar: 'L', help: `GPT blocks (default ${HETERO_REAL_DEFAULTS.layers})` },
      {
        name: 'iterations',
        type: 'int',
        metavar: 'N',
        help: `iterations per training, the first not measured (default ${HETERO_REAL_DEFAULTS.iterations})`,
      },
      {
        name: 'fast-cpus',
        type: 'string',
        metavar: 'F',
        help: `the fast node's CPU quota in CPUs (default ${HETERO_REAL_DEFAULTS.fastCpus})`,
      },
      {
        name: 'slow-cpus',
        type: 'string',
        metavar: 'C',
        help: `the slow node's CPU quota in CPUs (default ${HETERO_REAL_DEFAULTS.slowCpus})`,
      },
    ],
    async (flags) => {
      const cpusFlag = (name: string, v: unknown) => {
        if (v === undefined) return undefined;
        const n = Number(v);
        if (!(n >= 0.1 && n <= 1)) throw new UsageError(`--${name} must be from 0.1 to 1, got ${String(v)}`);
        return n;
      };
      const fastCpus = cpusFlag('fast-cpus', flags.fastCpus);
      const slowCpus = cpusFlag('slow-cpus', flags.slowCpus);
      const iterations = positiveInt(flags, 'iterations');
      if (iterations !== undefined && iterations < 2)
        throw new UsageError('--iterations must be at least 2 (the first is not measured)');
      const r = await benchHeteroReal({
        rounds: positiveInt(flags, 'rounds'),
        layers: positiveInt(flags, 'layers'),
        fastCpus,
        slowCpus,
        iterations,
      });
      return flags.json ? r : formatHeteroReal(r);
    },
  );
