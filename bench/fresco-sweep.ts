// The FRESCO comparison (issue #27; run: npm run bench -- fresco [--preset quick|small|paper]):
// every method of the paper's appendix A.1 (Inconsistent, Stash, Recovery, SpecTrain,
// PipeOptim, LWP) and FRESCO, trained asynchronously under binding 1F1B (PipeDream's
// async 1F1B) on the virtual clock, with kept activations, for P in the preset's depths;
// per method and depth a small peak-LR sweep on seed 0, the best chosen by the paper's
// rule (lowest final training loss, EMA 0.97), then further seeds at that LR; in every
// seed the P = 1 projection control (FRESCO's projection of depth P applied at P = 1
// against the microbatches that just finished); and an α sweep at the deepest P.
// Every finished run is cached as JSON under out/fresco-sweep/<preset>/runs and skipped
// on a re-run, so an interrupted sweep resumes. The report (sweep-report.ts) is written
// beside it: slowdown table, final loss vs P, loss curves per depth, memory, time.
//
// Not modelled: the paper's 95M-parameter Transformer and its 20,000 updates (a residual
// MLP LM and a few hundred updates here); gradient clipping across stages (each stage
// clips its own); β1 is not swept (0.99, what the paper selects for every method).

import * as fs from 'fs';
import * as path from 'path';
import { createHash } from 'crypto';
import { resolveConfig } from '../job/config';
import { ConsistencyMethod, PAPER_METHODS, pipemareHorizon } from '../actors/param-store';
import { ASYNC_DEFAULTS, TRAIN_DEFAULTS } from '../job/defaults';
import { train } from '../cli/train';
import { TrainConfig } from '../models/train-config';
import { UsageError } from '../cli/args';

/** The methods compared, by the paper's names. */
export const SWEEP_METHODS = PAPER_METHODS;

export interface SweepPreset {
  readonly name: string;
  /** Residual MLP LM: blocks, width, rows per microbatch (above width + 1, so FRESCO's rank-k relaxation acts). */
  readonly layers: number;
  readonly width: number;
  readonly rows: number;
  readonly updates: number;
  /** Fraction of the updates that warm the lr up (the paper: 3,000 of 20,000). */
  readonly warmupFraction: number;
  readonly depths: readonly number[];
  readonly lrs: readonly number[];
  readonly seeds: readonly number[];
  /** α values tried for FRESCO at the deepest P (seed 0, its best LR), besides the default 0.25. */
  readonly alphas: readonly number[];
}

export const SWEEP_PRESETS: Record<string, SweepPreset> = {
  // CI size: minutes.
  quick: {
    name: 'quick',
    layers: 8,
    width: 16,
    rows: 32,
    updates: 48,
    warmupFraction: 0.15,
    depths: [1, 2, 4],
    lrs: [1e-2, 3e-3],
    seeds: [0, 1],
    alphas: [0.5],
  },
  // What fits an hour on two shared cores: P up to 16, a few hundred CPU-seconds a run at most.
  small: {
    name: 'small',
    layers: 16,
    width: 16,
    rows: 32,
    updates: 100,
    warmupFraction: 0.15,
    depths: [1, 2, 4, 8, 16],
    lrs: [3e-3, 1e-3],
    seeds: [0, 1, 2],
    alphas: [0.125, 0.5, 1],
  },
  // The paper's regime at a size two cores finish in about an hour and a half (two processes
  // splitting the depths with --depths): P up to 32, rows above both layers' input widths
  // (33 and 129), so the rank-k relaxation acts on every linear layer.
  medium: {
    name: 'medium',
    layers: 32,
    width: 32,
    rows: 160,
    updates: 500,
    warmupFraction: 0.15,
    depths: [1, 2, 4, 8, 16, 32],
    lrs: [1e-2, 3e-2, 3e-3],
    seeds: [0, 1, 2],
    alphas: [0.125, 0.5, 1],
  },
  // The regime the issue asks for: 32 blocks of width 64, 128 rows per microbatch, P up to 32.
  paper: {
    name: 'paper',
    layers: 32,
    width: 64,
    rows: 128,
    updates: 2000,
    warmupFraction: 0.15,
    depths: [1, 2, 4, 8, 16, 32],
    lrs: [3e-4, 1e-3, 3e-3],
    seeds: [0, 1, 2],
    alphas: [0.125, 0.5, 1],
  },
};

export interface RunSpec {
  readonly stages: number;
  /** 'inconsistent' at P = 1 is the reference (every method is exact there). */
  readonly method: ConsistencyMethod;
  readonly lr: number;
  readonly seed: number;
  readonly alpha: number;
  /** projection-control: the depth whose projection it applies. */
  readonly controlStages?: number;
}

export interface RunResult extends RunSpec {
  readonly losses: number[];
  readonly updates: number;
  /** Peak extra bytes of each stage's policy (parameter-sized buffers, bases), summed over stages. */
  readonly extraStateBytes: number;
  readonly stalenessMax: number[];
  readonly seconds: number;
}

export function runKey(p: SweepPreset, r: RunSpec): string {
  const id = JSON.stringify([
    p.layers,
    p.width,
    p.rows,
    p.updates,
    p.warmupFraction,
    r.stages,
    r.method,
    r.lr,
    r.seed,
    r.alpha,
    r.controlStages ?? 0,
  ]);
  const tag = `P${r.stages}-${r.method}${r.controlStages ? `${r.controlStages}` : ''}-lr${r.lr}-s${r.seed}-a${r.alpha}`;
  return `${tag}-${createHash('sha1').update(id).digest('hex').slice(0, 8)}`;
}

export function corpusPath(data?: string): string {
  const file = data ?? path.join(__dirname, '..', '..', '..', 'shared', 'data', 'tinyshakespeare.txt');
  if (!fs.existsSync(file))
    throw new UsageError(
      `no corpus at ${file} (tinyshakespeare is not part of the repository): pass --data FILE, any UTF-8 text file`,
    );
  return file;
}

/** Trains one run (no cache). */
export async function trainRun(p: SweepPreset, r: RunSpec, data: string): Promise<RunResult> {
  const U = p.updates;
  const t: TrainConfig = {
    ...TRAIN_DEFAULTS,
    model: 'mlp',
    data,
    microbatchSize: p.rows,
    seq: 16,
    layers: p.layers,
    width: p.width,
    lr: r.lr,
    totalIterations: 1,
    valBatches: 0,
    seed: r.seed,
  };
  const cfg = resolveConfig({
    job: `fresco-${r.stages}-${r.method}`,
    stages: r.stages,
    microbatches: U,
    iterations: 1,
    policy: '1f1b',
    profile: 'uniform',
    mode: 'async',
    train: t,
    stallTimeoutMs: 3600000,
    async: {
      ...ASYNC_DEFAULTS,
      consistency: r.method,
      alpha: r.alpha,
      lr: r.lr,
      warmup: Math.round(p.warmupFraction * U),
      totalUpdates: U,
      pipemareSteps: pipemareHorizon(U),
      backward: 'kept',
      controlStages: r.controlStages ?? 1,
    },
  });
  const t0 = performance.now();
  const out = await train(cfg, { transport: 'local', processes: 'single', clock: 'virtual' });
  const seconds = (performance.now() - t0) / 1000;
  const s = out.summary as { extra_state_bytes?: number[]; staleness?: { max: number }[] };
  return {
    ...r,
    losses: out.losses,
    updates: U,
    seconds,
    extraStateBytes: (s.extra_state_bytes ?? []).reduce((a, b) => a + b, 0),
    stalenessMax: (s.staleness ?? []).map((x) => x.max),
  };
}

/** A run from the cache, or trained and cached. */
export async function cachedRun(
  dir: string,
  p: SweepPreset,
  r: RunSpec,
  data: string,
  log: (s: string) => void,
): Promise<RunResult> {
  const file = path.join(dir, 'runs', `${runKey(p, r)}.json`);
  if (fs.existsSync(file)) return JSON.parse(fs.readFileSync(file, 'utf8')) as RunResult;
  const res = await trainRun(p, r, data);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(`${file}.tmp`, JSON.stringify(res));
  fs.renameSync(`${file}.tmp`, file);
  const last = res.losses.slice(-10);
  log(
    `P=${r.stages} ${r.method}${r.controlStages ? `(${r.controlStages})` : ''} lr ${r.lr} seed ${r.seed} α ${r.alpha}: last-10 mean ${(last.reduce((a, b) => a + b, 0) / last.length).toFixed(4)} (${res.seconds.toFixed(1)} s)`,
  );
  return res;
}

/** Exponential moving average (decay 0.97, as FRESCO's evaluation), bias-corrected. */
export function ema(xs: readonly number[], decay = 0.97): number[] {
  const out: number[] = [];
  let m = 0;
  xs.forEach((x, i) => {
    m = decay * m + (1 - decay) * x;
    out.push(m / (1 - decay ** (i + 1)));
  });
  return out;
}

export const finalLoss = (r: RunResult): number => ema(r.losses).at(-1)!;

/** The paper's rule: the run with the lowest final EMA training loss (the first, on a tie). */
export function bestRun(runs: readonly RunResult[]): RunResult {
  if (runs.length === 0) throw new UsageError('bestRun: no runs to choose from');
  return runs.reduce((a, b) => (finalLoss(b) < finalLoss(a) ? b : a));
}

/**
 * Everything a preset's sweep runs, in phases, so that whatever finishes first is whole:
 *  A. per depth (shallowest first): every method at the first LR for every seed, then
 *     the P = 1 projection control of that depth for every seed;
 *  B. the rest of the LR sweep on the first seed, per method and depth, and the other
 *     seeds again at the LR the paper's rule picks when it is not the first;
 *  C. the α sweep of FRESCO at the deepest P (first seed, its best LR).
 * `phases` limits which run (default all).
 */
export async function runSweep(
  p: SweepPreset,
  dir: string,
  data: string,
  log: (s: string) => void,
  phases = 'ABC',
): Promise<RunResult[]> {
  const all: RunResult[] = [];
  const run = async (r: RunSpec) => {
    const res = await cachedRun(dir, p, r, data, log);
    all.push(res);
    return res;
  };
  const alpha = ASYNC_DEFAULTS.alpha;
  const [lr0, ...otherLrs] = p.lrs;
  const [seed0, ...others] = p.seeds;
  const deep = p.depths.filter((d) => d > 1);
  const methodsAt = (P: number): readonly ConsistencyMethod[] => (P === 1 ? ['inconsistent'] : SWEEP_METHODS);
  if (phases.includes('A'))
    for (const P of p.depths) {
      for (const seed of p.seeds)
        for (const method of methodsAt(P)) await run({ stages: P, method, lr: lr0, seed, alpha });
      if (P > 1)
        for (const seed of p.seeds)
          await run({ stages: 1, method: 'projection-control', lr: lr0, seed, alpha, controlStages: P });
    }
  const best = new Map<string, number>();
  if (phases.includes('B') || phases.includes('C'))
    for (const P of p.depths)
      for (const method of methodsAt(P)) {
        const sweep = [await run({ stages: P, method, lr: lr0, seed: seed0, alpha })];
        if (phases.includes('B'))
          for (const lr of otherLrs) sweep.push(await run({ stages: P, method, lr, seed: seed0, alpha }));
        const lr = bestRun(sweep).lr;
        best.set(`${P}/${method}`, lr);
        if (phases.includes('B') && lr !== lr0)
          for (const seed of others) await run({ stages: P, method, lr, seed, alpha });
      }
  if (phases.includes('C') && deep.length > 0) {
    const P = Math.max(...deep);
    for (const a of p.alphas)
      await run({ stages: P, method: 'fresco', lr: best.get(`${P}/fresco`)!, seed: seed0, alpha: a });
  }
  return all;
}
