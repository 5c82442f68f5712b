// Benchmark for the runtime core (run: npm run bench -- sim, or node dist/bench/sim-policies.js).
// Measured in one run, side by side: for profiles llm and multimodal with paper jitter,
// P in {8,16,32}, M=64, every policy's makespan, speedup over binding 1f1b and
// efficiency (lower bound / makespan), as the mean over iterations; bf's efficiency
// with compute-only jitter; the wall time of a P=32, M=192, 3-iteration simulation
// (median of repeats); and the arbiter's cost per decision (every policy warmed up before
// any is timed, then the median of repeats taken in turn, reversed on odd repeats).
// With --reference offline, also each policy's makespan against the offline reference
// (job/run-reference.ts) on the same realized durations: bf's run for the policies with
// one backward, bfw's for those with B/W split.

import { resolveConfig, JobConfig } from '../job/config';
import { arbiterFor } from '../policies/arbiter';
import { runJob, summarize } from '../job/run-local';
import { runReference } from '../job/run-reference';
import { ReadySet } from '../stage/ready-set';
import { median } from '../checks/stats';
import { resolvePolicy } from '../policies/registry';
import { PipelineShape, task } from '../policies/task';
import { formatTable } from '../cli/table';
import { RATIO_NOTE, REFERENCE_FLAG } from '../cli/reference-flag';
import { inTurn } from './in-turn';
import { benchMain } from './bench-cli';

const POLICIES = ['1f1b', 'bf', 'fb', 'b-priority', 'f-priority', 'gpipe', 'zb-h1', 'bfw'];

export interface SimBenchOptions {
  stages?: number[];
  profiles?: string[];
  microbatches?: number;
  iterations?: number;
  seed?: number;
  wallRepeats?: number;
  arbiterRepeats?: number;
  /** Compute the offline reference (costs a search per profile, P and backward kind). */
  reference?: boolean;
}

async function sim(c: Partial<JobConfig>) {
  return summarize(await runJob(resolveConfig(c), { clock: 'virtual' }));
}

/** The offline reference's makespan on the realized durations of `policy`'s run. */
async function offlineMs(c: Partial<JobConfig>, policy: string): Promise<number> {
  return runReference(await runJob(resolveConfig({ ...c, policy }), { clock: 'virtual' }), true).offline_ms;
}

/** Mean µs per arbitration over a full ready set (M forwards and M/2 backwards ready). */
export function arbiterCostUs(policyName: string, shape: PipelineShape, decisions = 200000): number {
  const policy = resolvePolicy(policyName);
  const s = { ...shape, splitBackward: policy.splitBackward };
  const ready = new ReadySet(s);
  for (let j = 0; j < s.microbatches; j++) ready.add(task('F', j, 0));
  for (let j = 0; j < s.microbatches; j += 2) ready.add(task('B', j, 0));
  const ctx = { stage: 1, shape: s, done: () => false, inflight: 4 };
  const arbiter = arbiterFor(policy, 32);
  const memo = policy.start(ctx);
  let sink = 0;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < decisions; i++) {
    const r = arbiter.pick(ready, memo, ctx);
    if (r.task) sink += r.task.mb;
  }
  const us = Number(process.hrtime.bigint() - t0) / 1e3 / decisions;
  if (sink < 0) throw new Error('unreachable');
  return us;
}

/**
 * Each policy's arbiter cost (µs per decision): every policy is first run untimed, so none
 * is timed while its code (or the ready set's, which they share) is still cold, then all are
 * timed `repeats` times in turn, in reverse order on odd repeats; the median of each.
 */
export function arbiterCosts(
  policies: readonly string[],
  shape: PipelineShape,
  repeats = 3,
  decisions = 200000,
): { median: Record<string, number>; runs: Record<string, number[]> } {
  for (const p of policies) arbiterCostUs(p, shape, Math.ceil(decisions / 10));
  const runs: Record<string, number[]> = Object.fromEntries(policies.map((p) => [p, []]));
  for (let r = 0; r < repeats; r++)
    for (const p of inTurn(policies, r)) runs[p].push(arbiterCostUs(p, shape, decisions));
  return { median: Object.fromEntries(policies.map((p) => [p, median(runs[p])])), runs };
}

export async function benchSimPolicies(o: SimBenchOptions = {}) {
  const stagesList = o.stages ?? [8, 16, 32];
  const profiles = o.profiles ?? ['llm', 'multimodal'];
  const M = o.microbatches ?? 64;
  const iterations = o.iterations ?? 3;
  const seed = o.seed ?? 0;
  const rows: Record<string, unknown>[] = [];
  for (const profile of profiles)
    for (const P of stagesList) {
      const base = await sim({
        stages: P,
        microbatches: M,
        profile,
        jitter: 'paper',
        iterations,
        seed,
        policy: '1f1b',
      });
      const job = { stages: P, microbatches: M, profile, jitter: 'paper' as const, iterations, seed };
      const offline = o.reference ? { one: await offlineMs(job, 'bf'), split: await offlineMs(job, 'bfw') } : undefined;
      for (const policy of POLICIES) {
        const s =
          policy === '1f1b'
            ? base
            : await sim({ stages: P, microbatches: M, profile, jitter: 'paper', iterations, seed, policy });
        const ref = offline && (policy === 'bfw' || policy === 'zb-h1' ? offline.split : offline.one);
        rows.push({
          profile,
          stages: P,
          policy,
          makespan_ms: s.makespan_ms,
          speedup_vs_1f1b: base.makespan_ms / s.makespan_ms,
          efficiency: s.efficiency,
          ...(ref === undefined ? {} : { offline_ms: ref, vs_offline: ref / s.makespan_ms }),
        });
      }
      const c = await sim({ stages: P, microbatches: M, profile, jitter: 'compute', iterations, seed, policy: 'bf' });
      rows.push({
        profile,
        stages: P,
        policy: 'bf (compute jitter)',
        makespan_ms: c.makespan_ms,
        speedup_vs_1f1b: NaN,
        efficiency: c.efficiency,
      });
    }
  const walls: number[] = [];
  for (let i = 0; i < (o.wallRepeats ?? 3); i++) {
    const t0 = performance.now();
    await sim({ stages: 32, microbatches: 192, iterations: 3, profile: 'llm', jitter: 'paper', policy: 'bf' });
    walls.push(performance.now() - t0);
  }
  const shape: PipelineShape = { stages: 8, chunks: 1, microbatches: 64, splitBackward: false };
  const arbiter = arbiterCosts(['bf', 'b-priority', 'hint:1f1b', '1f1b'], shape, o.arbiterRepeats ?? 3);
  return {
    rows,
    wall_p32_m192_i3_ms: median(walls),
    wall_repeats_ms: walls,
    arbiter_us_per_decision: arbiter.median,
    arbiter_runs_us: arbiter.runs,
    microbatches: M,
    iterations,
    seed,
  };
}

export function formatSimBench(r: Awaited<ReturnType<typeof benchSimPolicies>>): string {
  const ref = r.rows.some((x) => x.vs_offline !== undefined);
  const table = formatTable(
    ['profile', 'P', 'policy', 'makespan ms', 'speedup vs 1f1b', 'efficiency', ...(ref ? ['vs offline'] : [])],
    r.rows.map((x) => [
      String(x.profile),
      String(x.stages),
      String(x.policy),
      (x.makespan_ms as number).toFixed(1),
      Number.isNaN(x.speedup_vs_1f1b) ? '-' : `${(x.speedup_vs_1f1b as number).toFixed(2)}x`,
      (x.efficiency as number).toFixed(3),
      ...(ref ? [x.vs_offline === undefined ? '-' : (x.vs_offline as number).toFixed(3)] : []),
    ]),
    `paper jitter, M=${r.microbatches}, mean of ${r.iterations} iterations, seed ${r.seed} (${ref ? RATIO_NOTE : 'efficiency = lower bound / makespan'})`,
  );
  const arb = Object.entries(r.arbiter_us_per_decision)
    .map(([p, us]) => `${p} ${us.toFixed(3)} µs`)
    .join(', ');
  return (
    `${table}\n\nP=32 M=192 3-iteration simulation wall time: median ${(r.wall_p32_m192_i3_ms / 1000).toFixed(2)} s ` +
    `(runs: ${r.wall_repeats_ms.map((w) => (w / 1000).toFixed(2)).join(', ')} s)\narbiter cost per decision (P=8, M=64 ready set; median of ${Object.values(r.arbiter_runs_us)[0]?.length ?? 0}, each policy warmed up first): ${arb}`
  );
}

if (require.main === module) {
  benchMain(
    'sim',
    'every policy against binding 1f1b on the virtual clock (llm, multimodal; P 8-32), P=32 wall time, arbiter cost',
    [REFERENCE_FLAG],
    async (flags) => {
      const r = await benchSimPolicies({ reference: flags.reference === 'offline' });
      return flags.json ? r : formatSimBench(r);
    },
  );
}
