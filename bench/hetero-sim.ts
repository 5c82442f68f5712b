// Benchmark of the speed-aware partition on the virtual clock (run: npm run bench -- hetero
// [--speeds 1,1,1,0.5,1,0.33,1,1] [--microbatches M] [--seed S]). P = one stage per node of
// the given speeds (stage s on node s: placement auto with stages of equal work). For the
// `uniform` profile without jitter and `llm` with the paper's jitter, policies bf and 1f1b:
// the makespan with the layers split evenly (`--partition uniform`) against split in
// proportion to the nodes' speeds (`--partition speed`), beside the same pipeline on nodes
// all of speed 1. Efficiency = lower bound / makespan of that run; vs ideal = the
// speed-aware run's lower bound (balanced stages on these nodes) / makespan.
//
// Emulated compute: a node of speed s runs its tasks 1/s as long. Not modelled: a slow
// node's slower messages.

import { resolveConfig, JobConfig } from '../job/config';
import { runJob, summarize } from '../job/run-local';
import { formatTable } from '../cli/table';
import { UsageError } from '../cli/args';
import { benchMain, positiveInt } from './bench-cli';

export const HETERO_SPEEDS = [1, 1, 1, 0.5, 1, 0.33, 1, 1];
const CASES = [
  { profile: 'uniform', jitter: 'none' },
  { profile: 'llm', jitter: 'paper' },
] as const;
const POLICIES = ['bf', '1f1b'];

export interface HeteroRow {
  profile: string;
  jitter: string;
  policy: string;
  homogeneous_ms: number;
  uniform_ms: number;
  speed_ms: number;
  speedup: number;
  uniform_efficiency: number;
  speed_efficiency: number;
  uniform_vs_ideal: number;
  speed_vs_ideal: number;
}

async function sim(c: Partial<JobConfig>) {
  return summarize(await runJob(resolveConfig(c), { clock: 'virtual' }));
}

export async function benchHetero(o: { speeds?: number[]; microbatches?: number; seed?: number } = {}) {
  const speeds = o.speeds ?? HETERO_SPEEDS;
  const microbatches = o.microbatches ?? 64;
  const seed = o.seed ?? 0;
  const stages = speeds.length;
  const placement = speeds.map((_, k) => `node${k}`);
  const rows: HeteroRow[] = [];
  for (const c of CASES)
    for (const policy of POLICIES) {
      const base = { ...c, policy, stages, microbatches, seed, iterations: 1 };
      const homogeneous = await sim(base);
      const uniform = await sim({ ...base, stageSpeeds: speeds, placement, partition: 'uniform' });
      const speed = await sim({ ...base, stageSpeeds: speeds, placement, partition: 'speed' });
      const ideal = speed.lower_bound_ms;
      rows.push({
        ...c,
        policy,
        homogeneous_ms: homogeneous.makespan_ms,
        uniform_ms: uniform.makespan_ms,
        speed_ms: speed.makespan_ms,
        speedup: uniform.makespan_ms / speed.makespan_ms,
        uniform_efficiency: uniform.efficiency,
        speed_efficiency: speed.efficiency,
        uniform_vs_ideal: ideal / uniform.makespan_ms,
        speed_vs_ideal: ideal / speed.makespan_ms,
      });
    }
  return { speeds, stages, microbatches, seed, rows };
}

export function formatHetero(r: Awaited<ReturnType<typeof benchHetero>>): string {
  return formatTable(
    [
      'profile',
      'jitter',
      'policy',
      'all speed 1 ms',
      'uniform ms',
      'speed-aware ms',
      'speedup',
      'eff uniform',
      'eff speed-aware',
      'vs ideal uniform',
      'vs ideal speed-aware',
    ],
    r.rows.map((x) => [
      x.profile,
      x.jitter,
      x.policy,
      x.homogeneous_ms.toFixed(1),
      x.uniform_ms.toFixed(1),
      x.speed_ms.toFixed(1),
      `${x.speedup.toFixed(2)}x`,
      x.uniform_efficiency.toFixed(3),
      x.speed_efficiency.toFixed(3),
      x.uniform_vs_ideal.toFixed(3),
      x.speed_vs_ideal.toFixed(3),
    ]),
    `virtual clock, P=${r.stages} nodes of speeds ${r.speeds.join(',')}, M=${r.microbatches}, seed ${r.seed}; efficiency = lower bound / makespan; vs ideal = speed-aware lower bound / makespan`,
  );
}

function speedsFlag(raw: unknown): number[] | undefined {
  if (raw === undefined) return undefined;
  return (raw as string[]).map((x) => {
    const n = Number(x);
    if (!(n > 0 && Number.isFinite(n)))
      throw new UsageError(`--speeds takes positive numbers, got ${JSON.stringify(x)}`);
    return n;
  });
}

if (require.main === module) {
  benchMain(
    'hetero',
    'uniform against speed-aware partition on nodes of uneven speeds (virtual clock; bf, 1f1b; uniform and llm profiles)',
    [
      {
        name: 'speeds',
        type: 'list',
        metavar: 'S0,S1,…',
        help: 'node speeds, one stage each',
        default: HETERO_SPEEDS.join(','),
      },
      { name: 'microbatches', type: 'int', metavar: 'M', help: 'microbatches', default: 64 },
      { name: 'seed', type: 'int', metavar: 'S', help: 'seed of the realized durations', default: 0 },
    ],
    async (flags) => {
      const r = await benchHetero({
        speeds: speedsFlag(flags.speeds),
        microbatches: positiveInt(flags, 'microbatches'),
        seed: flags.seed as number,
      });
      return flags.json ? r : formatHetero(r);
    },
  );
}
