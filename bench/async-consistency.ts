// Benchmark for asynchronous pipelines (run: npm run bench -- async [--updates N] [--json]).
// On tinyshakespeare (../shared/data, or --data FILE), a residual MLP language model
// deep enough for P=8 trains asynchronously under binding 1f1b (PipeDream's async
// 1F1B) on the virtual clock (uniform durations, so the order and staleness are
// exactly those of 1F1B), for P in {1,2,4,8} x the paper's methods (see fresco-sweep.ts),
// the same seed and the same number of updates. Printed side by side: updates to reach
// a target loss, slowdown against P=1, final loss, extra memory; the loss curves are
// drawn to an SVG.

import * as fs from 'fs';
import * as path from 'path';
import { resolveConfig } from '../job/config';
import { ConsistencyName, pipemareHorizon } from '../actors/param-store';
import { SWEEP_METHODS, ema } from './fresco-sweep';
import { METHOD_COLORS } from './sweep-svg';
import { ASYNC_DEFAULTS } from '../job/defaults';
import { train } from '../cli/train';
import { formatTable } from '../cli/table';
import { loadBackend } from '../models/backend';
import { TrainConfig } from '../models/train-config';
import { TRAIN_DEFAULTS } from '../job/defaults';
import { benchMain, positiveInt } from './bench-cli';
import { UsageError } from '../cli/args';

/** The methods compared (the paper's names; the controls and aliases are not). */
const CONSISTENCY_POLICIES = SWEEP_METHODS;

interface Run {
  stages: number;
  consistency: ConsistencyName;
  losses: number[];
  smoothed: number[];
  final_loss: number;
  val_loss: number;
  extra_state_bytes: number;
  staleness_max: number[];
  seconds: number;
}

/** First update (1-based) at which the smoothed loss is at or below `target`, or null. */
export function updatesToReach(smoothed: readonly number[], target: number): number | null {
  const i = smoothed.findIndex((x) => x <= target);
  return i < 0 ? null : i + 1;
}

function curvesSvg(runs: Run[], title: string): string {
  const W = 1100,
    H = 700,
    pad = 60;
  const dashes: Record<number, string> = { 1: '', 2: '2,2', 4: '6,3', 8: '10,4' };
  const all = runs.flatMap((r) => r.smoothed);
  // Reduced, not spread: a long run's curve has more points than a call takes arguments.
  const lo = all.reduce((a, b) => Math.min(a, b), Infinity),
    hi = all.reduce((a, b) => Math.max(a, b), -Infinity);
  const n = runs.reduce((a, r) => Math.max(a, r.smoothed.length), 0);
  const x = (i: number) => pad + ((W - 2 * pad) * i) / Math.max(1, n - 1);
  const y = (v: number) => H - pad - ((H - 2 * pad) * (v - lo)) / Math.max(1e-9, hi - lo);
  const lines = runs.map((r) => {
    const d = r.smoothed.map((v, i) => `${i ? 'L' : 'M'}${x(i).toFixed(1)},${y(v).toFixed(1)}`).join('');
    return `<path d="${d}" fill="none" stroke="${METHOD_COLORS[r.consistency]}" stroke-width="1.5" stroke-dasharray="${dashes[r.stages] ?? ''}"><title>P=${r.stages} ${r.consistency}</title></path>`;
  });
  const ticks = Array.from({ length: 6 }, (_, i) => lo + ((hi - lo) * i) / 5).map(
    (v) =>
      `<text x="${pad - 8}" y="${y(v) + 4}" text-anchor="end" font-size="12">${v.toFixed(2)}</text><line x1="${pad}" x2="${W - pad}" y1="${y(v)}" y2="${y(v)}" stroke="#eee"/>`,
  );
  const step = Math.max(1, Math.ceil(n / 8 / 10) * 10);
  const xticks = Array.from({ length: Math.floor((n - 1) / step) + 1 }, (_, i) => i * step).map(
    (u) =>
      `<line x1="${x(u)}" x2="${x(u)}" y1="${H - pad}" y2="${H - pad + 5}" stroke="#333"/><text x="${x(u)}" y="${H - pad + 18}" text-anchor="middle" font-size="12">${u}</text>`,
  );
  const legend = [
    ...CONSISTENCY_POLICIES.map(
      (c, i) =>
        `<rect x="${W - pad - 150}" y="${pad + 18 * i}" width="12" height="12" fill="${METHOD_COLORS[c]}"/><text x="${W - pad - 132}" y="${pad + 18 * i + 11}" font-size="12">${c}</text>`,
    ),
    ...[1, 2, 4, 8].map(
      (p, i) =>
        `<line x1="${W - pad - 150}" x2="${W - pad - 110}" y1="${pad + 110 + 18 * i}" y2="${pad + 110 + 18 * i}" stroke="#333" stroke-dasharray="${dashes[p]}"/><text x="${W - pad - 104}" y="${pad + 114 + 18 * i}" font-size="12">P=${p}</text>`,
    ),
  ];
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" font-family="sans-serif">` +
    `<rect width="${W}" height="${H}" fill="white"/><text x="${pad}" y="30" font-size="16" font-weight="bold">${title.replace(/&/g, '&amp;').replace(/</g, '&lt;')}</text>` +
    ticks.join('') +
    xticks.join('') +
    lines.join('') +
    legend.join('') +
    `<text x="${W / 2}" y="${H - 15}" text-anchor="middle" font-size="13">update</text>` +
    `<text x="18" y="${H / 2}" font-size="13" transform="rotate(-90 18 ${H / 2})" text-anchor="middle">training loss (EMA 0.97)</text></svg>`
  );
}

/** The learning rate warms up over the first 20 updates (the stores count updates; `train --warmup` counts iterations of M). */
const WARMUP_UPDATES = 20;

/** One asynchronous run of the bench: P stages, one consistency policy, M x iterations updates. */
async function asyncRun(
  t: TrainConfig,
  P: number,
  consistency: ConsistencyName,
  M: number,
  iterations: number,
): Promise<Run> {
  const t0 = performance.now();
  const cfg = resolveConfig({
    job: `async-${P}-${consistency}`,
    stages: P,
    microbatches: M * iterations,
    iterations: 1,
    policy: '1f1b',
    profile: 'uniform',
    mode: 'async',
    train: t,
    stallTimeoutMs: 600000,
    async: {
      ...ASYNC_DEFAULTS,
      consistency,
      lr: t.lr,
      warmup: WARMUP_UPDATES,
      totalUpdates: M * iterations,
      pipemareSteps: pipemareHorizon(M * iterations),
    },
  });
  const r = await train(cfg, { transport: 'local', processes: 'single', clock: 'virtual' });
  const s = r.summary;
  const run: Run = {
    stages: P,
    consistency,
    losses: r.losses,
    smoothed: ema(r.losses),
    final_loss: ema(r.losses).at(-1)!,
    val_loss: r.val_loss,
    extra_state_bytes: (s.extra_state_bytes ?? []).reduce((a, b) => a + b, 0),
    staleness_max: (s.staleness ?? []).map((x) => x.max),
    seconds: (performance.now() - t0) / 1000,
  };
  process.stderr.write(`P=${P} ${consistency}: final ${run.final_loss.toFixed(4)} (${run.seconds.toFixed(1)} s)\n`);
  return run;
}

export async function benchAsync(o: { updates?: number; data?: string; stages?: number[]; svg?: string } = {}) {
  const data = o.data ?? path.join(__dirname, '..', '..', '..', 'shared', 'data', 'tinyshakespeare.txt');
  if (!fs.existsSync(data))
    throw new UsageError(
      `no corpus at ${data} (tinyshakespeare is not part of the repository): pass --data FILE, any UTF-8 text file`,
    );
  const backend = (await loadBackend()).backend;
  const updates = o.updates ?? 400;
  const M = 16;
  const iterations = Math.ceil(updates / M);
  const t: TrainConfig = {
    ...TRAIN_DEFAULTS,
    model: 'mlp',
    data,
    microbatchSize: 32,
    seq: 16,
    layers: 8,
    width: 128,
    lr: 2e-3,
    totalIterations: iterations,
    valBatches: 8,
    seed: 1,
  };
  const runs: Run[] = [];
  for (const P of o.stages ?? [1, 2, 4, 8])
    for (const consistency of CONSISTENCY_POLICIES) runs.push(await asyncRun(t, P, consistency, M, iterations));
  // Target: the loss the P=1 run (no staleness: every policy is exact) reaches at 60% of the updates.
  const ref = runs.find((r) => r.stages === 1 && r.consistency === 'inconsistent') ?? runs[0];
  const target = ref.smoothed[Math.floor(ref.smoothed.length * 0.6)];
  const base = new Map(
    runs.filter((r) => r.stages === 1).map((r) => [r.consistency, updatesToReach(r.smoothed, target)]),
  );
  const rows = runs.map((r) => {
    const n = updatesToReach(r.smoothed, target);
    const b = base.get(r.consistency) ?? updatesToReach(ref.smoothed, target);
    return {
      stages: r.stages,
      consistency: r.consistency,
      updates_to_target: n,
      slowdown_vs_p1: n !== null && b ? n / b : null,
      final_loss: r.final_loss,
      val_loss: r.val_loss,
      extra_state_bytes: r.extra_state_bytes,
      staleness_max: r.staleness_max,
      seconds: r.seconds,
    };
  });
  const svg = o.svg ?? path.join('out', 'async-loss-curves.svg');
  fs.mkdirSync(path.dirname(svg), { recursive: true });
  fs.writeFileSync(
    svg,
    curvesSvg(
      runs,
      `async 1F1B, MLP LM (8 blocks, d128) on ${path.basename(data)}, ${M * iterations} updates, target ${target.toFixed(3)}`,
    ),
  );
  return {
    backend,
    updates: M * iterations,
    target_loss: target,
    rows,
    svg,
    curves: runs.map((r) => ({ stages: r.stages, consistency: r.consistency, losses: r.losses })),
  };
}

export function formatAsync(r: Awaited<ReturnType<typeof benchAsync>>): string {
  return formatTable(
    [
      'P',
      'consistency',
      'updates to target',
      'slowdown vs P=1',
      'final loss (EMA)',
      'val loss',
      'extra memory',
      'max staleness',
    ],
    r.rows.map((x) => [
      String(x.stages),
      x.consistency,
      x.updates_to_target === null ? `> ${r.updates}` : String(x.updates_to_target),
      x.slowdown_vs_p1 === null ? '-' : `${x.slowdown_vs_p1.toFixed(2)}x`,
      x.final_loss.toFixed(4),
      x.val_loss.toFixed(4),
      `${(x.extra_state_bytes / 1024).toFixed(1)} KiB`,
      x.staleness_max.join(','),
    ]),
    `backend ${r.backend}; ${r.updates} updates; target loss ${r.target_loss.toFixed(4)} (P=1 at 60% of the updates); curves: ${r.svg}`,
  );
}

if (require.main === module) {
  benchMain(
    'async',
    'asynchronous training: consistency policies x P on tinyshakespeare, loss-curve SVG',
    [
      {
        name: 'updates',
        type: 'int',
        metavar: 'N',
        help: 'updates per run, rounded up to a multiple of 16 (the microbatches of one pass; default 400)',
      },
      {
        name: 'data',
        type: 'string',
        metavar: 'FILE',
        help: 'the corpus, any UTF-8 text file (default: ../shared/data/tinyshakespeare.txt beside this checkout, not part of the repository)',
      },
    ],
    async (flags) => {
      const data = flags.data as string | undefined;
      if (data !== undefined && !fs.existsSync(data)) throw new UsageError(`--data ${data}: no such file`);
      const r = await benchAsync({ updates: positiveInt(flags, 'updates'), data });
      return flags.json ? { ...r, curves: undefined } : formatAsync(r);
    },
  );
}
