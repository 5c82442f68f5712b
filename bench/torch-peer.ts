// Baton against its compute peer, PyTorch on the same CPU (run: npm run bench -- peer
// [--rounds R] [--iterations N] [--layers L] [--json]). The same char-GPT (d 128, L
// blocks, 4 heads, seq 64, microbatch 16, M = 8, AdamW; scripts/torch_peer.py is
// nanoGPT's architecture as Baton builds it) trained by Debian's PyTorch
// (/usr/bin/python3, python3-torch; scripts/install-torch-peer.sh) and by `baton train`:
//  - one Baton process (--stages 1) against PyTorch, threads matched: 1 and 2;
//  - Baton's 2-stage pipeline over NATS, one process per stage with 1 thread each (both
//    cores), against PyTorch with 2 threads: as `baton train` runs it by default, able to
//    survive a lost stage (each stage sends its state every --state-every N flushes), and
//    with --max-restarts 0 (no state kept: what PyTorch's loop, which survives nothing, does).
// PyTorch's threads are matched to the cores for real: "1 thread" is one OpenMP thread and
// one OpenBLAS thread (torch.set_num_threads does not reach Debian's OpenBLAS, which
// otherwise runs a thread per core); "2 threads" is the faster, in each round, of its two
// layouts on 2 cores, 2 OpenMP × 1 BLAS thread and 1 × 2 (2 × 2 oversubscribes the cores:
// 3.3 s an iteration against 1.3 s, measured 2026-12-03).
// Every measurement is a fresh child process; R rounds, the setups in turn (reversed in
// odd rounds, so a drift of the machine within a round favours none); each child's
// first iteration is not timed, and its rate is the tokens of the timed ones over their
// summed time (a pause every N iterations counts as it costs). Reported: median tokens/s
// (and range) of each setup over the rounds and the median of each round's ratio.
// Without PyTorch it says so and measures nothing.
//
// Not compared: PyTorch's data loading, evaluation or compiled modes (none in 1.13).

import * as fs from 'fs';
import * as path from 'path';
import { spawnSync } from 'child_process';
import { median } from '../checks/stats';
import { formatTable } from '../cli/table';
import { CLI_ENTRY } from '../cli/run';
import { UsageError } from '../cli/args';
import { childJson } from './child-json';
import { benchMain, positiveInt } from './bench-cli';
import { inTurn } from './in-turn';
import { TRAIN_COMMAND_DEFAULTS } from '../job/defaults';

export const PEER_PYTHON = '/usr/bin/python3';
export const PEER_SCRIPT = path.resolve(
  __dirname,
  __dirname.includes(`${path.sep}dist${path.sep}`) ? '../..' : '..',
  'scripts',
  'torch_peer.py',
);

// 8 timed iterations: with the default --state-every 8, one state falls in each pipeline run.
export const PEER_DEFAULTS = { rounds: 3, iterations: 8, layers: 8 } as const;
const MODEL = { microbatches: 8, microbatchSize: 16, seq: 64, width: 128, heads: 4 } as const;

/** Why PyTorch cannot run here, or null. */
export function torchMissing(): string | null {
  if (!fs.existsSync(PEER_PYTHON)) return `${PEER_PYTHON} is not installed`;
  const r = spawnSync(PEER_PYTHON, ['-c', 'import torch'], { encoding: 'utf8' });
  return r.status === 0
    ? null
    : `${PEER_PYTHON} cannot import torch (scripts/install-torch-peer.sh installs Debian's python3-torch)`;
}

type Setup = 'torch1' | 'baton1' | 'torch2' | 'baton2' | 'pipeline' | 'pipeline_bare';
const SETUPS: readonly Setup[] = ['torch1', 'baton1', 'torch2', 'baton2', 'pipeline', 'pipeline_bare'];
const LABEL: Record<Setup, string> = {
  torch1: 'PyTorch, 1 thread (1 BLAS thread)',
  baton1: 'Baton, 1 process, 1 thread',
  torch2: 'PyTorch, 2 cores (faster of 2x1, 1x2 threads)',
  baton2: 'Baton, 1 process, 2 threads',
  pipeline: `Baton, 2-stage pipeline over NATS, 1 thread per stage (recoverable: state every ${TRAIN_COMMAND_DEFAULTS.stateEvery} flushes)`,
  pipeline_bare: 'the same pipeline, --max-restarts 0 (no state kept)',
};
/** What each Baton setup adds to `baton train`: stages, threads, flags. */
const PIPELINE = ['--transport', 'nats', '--processes', 'per-stage', '--policy', 'bf', '--buffer-limit', '3'];
const BATON: Record<Exclude<Setup, 'torch1' | 'torch2'>, { stages: number; threads: number; flags: string[] }> = {
  baton1: { stages: 1, threads: 1, flags: [] },
  baton2: { stages: 1, threads: 2, flags: [] },
  pipeline: { stages: 2, threads: 1, flags: PIPELINE },
  pipeline_bare: { stages: 2, threads: 1, flags: [...PIPELINE, '--max-restarts', '0'] },
};

/** Tokens per second over the timed iterations, `seconds` each. */
const rateOf = (seconds: readonly number[]) =>
  (tokensPerIteration() * seconds.length) / seconds.reduce((a, b) => a + b, 0);

const tokensPerIteration = () => MODEL.microbatches * MODEL.microbatchSize * MODEL.seq;

/** The model's flags, spelled alike by torch_peer.py and baton train. */
function modelArgs(layers: number): string[] {
  const flags = {
    microbatches: MODEL.microbatches,
    'microbatch-size': MODEL.microbatchSize,
    seq: MODEL.seq,
    layers,
    width: MODEL.width,
    heads: MODEL.heads,
  };
  return Object.entries(flags).flatMap(([name, value]) => [`--${name}`, String(value)]);
}

/** PyTorch's tokens/s with `threads` OpenMP and `blas` OpenBLAS threads. */
async function torchRun(threads: number, blas: number, iterations: number, layers: number): Promise<number> {
  const r = (await childJson(
    PEER_PYTHON,
    [
      PEER_SCRIPT,
      '--threads',
      String(threads),
      '--blas-threads',
      String(blas),
      '--iterations',
      String(iterations),
      ...modelArgs(layers),
    ],
    'torch_peer.py',
  )) as { iteration_s?: number[]; threads?: number; blas_threads?: number };
  if (!Array.isArray(r.iteration_s) || r.iteration_s.length === 0)
    throw new Error('torch_peer.py printed no iteration times');
  if (r.threads !== threads || r.blas_threads !== blas)
    throw new Error(`torch_peer.py ran with ${r.threads} + ${r.blas_threads} BLAS threads, asked ${threads} + ${blas}`);
  return rateOf(r.iteration_s);
}

/** PyTorch on one core, or on two in the faster of its two thread layouts (the file's head says why). */
async function torchOn(cores: 1 | 2, iterations: number, layers: number): Promise<number> {
  if (cores === 1) return torchRun(1, 1, iterations, layers);
  return Math.max(await torchRun(2, 1, iterations, layers), await torchRun(1, 2, iterations, layers));
}

async function batonRun(
  setup: (typeof BATON)[keyof typeof BATON],
  iterations: number,
  layers: number,
  job: string,
): Promise<{ rate: number; kernels: string; backend: string }> {
  const { stages, threads } = setup;
  const args = [
    CLI_ENTRY,
    'train',
    '--model',
    'gpt',
    '--stages',
    String(stages),
    ...modelArgs(layers),
    '--iterations',
    String(iterations + 1),
    '--val-batches',
    '1',
    '--threads',
    String(threads),
    '--job',
    job,
    '--json',
    ...setup.flags,
  ];
  const r = (await childJson(process.execPath, args, 'baton train')) as {
    iterations?: { makespan_ms: number }[];
    kernels?: string;
    backend?: string;
  };
  if (!r || !Array.isArray(r.iterations)) throw new Error('baton train printed no run statistics');
  return {
    rate: rateOf(r.iterations.slice(1).map((x) => x.makespan_ms / 1000)),
    kernels: String(r.kernels),
    backend: String(r.backend),
  };
}

export interface PeerResult {
  model: string;
  rounds: number;
  iterations: number;
  backend: string;
  kernels: Record<string, string>;
  /** tokens/s of each setup in each round. */
  per_round: Record<Setup, number>[];
  median: Record<Setup, number>;
  ratios: { one_thread: number; two_threads: number; pipeline_over_torch2: number; bare_pipeline_over_torch2: number };
  /** The pipeline's --state-every (train's default). */
  state_every: number;
  shared_machine_note: string;
}

export async function benchTorchPeer(
  o: { rounds?: number; iterations?: number; layers?: number } = {},
): Promise<PeerResult> {
  const missing = torchMissing();
  if (missing) throw new UsageError(`bench peer: PyTorch is not available: ${missing}`);
  const rounds = o.rounds ?? PEER_DEFAULTS.rounds;
  const iterations = o.iterations ?? PEER_DEFAULTS.iterations;
  const layers = o.layers ?? PEER_DEFAULTS.layers;
  const perRound: Record<Setup, number>[] = [];
  const kernels: Record<string, string> = {};
  let backend = '';
  for (let r = 0; r < rounds; r++) {
    const round = {} as Record<Setup, number>;
    for (const s of inTurn(SETUPS, r)) {
      if (s === 'torch1' || s === 'torch2') round[s] = await torchOn(s === 'torch1' ? 1 : 2, iterations, layers);
      else {
        const b = await batonRun(BATON[s], iterations, layers, `peer${s.replace('_', '')}r${r}`);
        round[s] = b.rate;
        kernels[s] = b.kernels;
        backend = b.backend;
      }
      process.stderr.write(`bench peer: round ${r + 1}/${rounds}: ${LABEL[s]}: ${round[s].toFixed(0)} tokens/s\n`);
    }
    perRound.push(round);
  }
  const med = Object.fromEntries(SETUPS.map((s) => [s, median(perRound.map((x) => x[s]))])) as Record<Setup, number>;
  return {
    model: `char-GPT d${MODEL.width} L${layers} H${MODEL.heads} seq${MODEL.seq} B${MODEL.microbatchSize} M${MODEL.microbatches}`,
    rounds,
    iterations,
    backend,
    kernels,
    per_round: perRound,
    median: med,
    ratios: {
      one_thread: median(perRound.map((x) => x.baton1 / x.torch1)),
      two_threads: median(perRound.map((x) => x.baton2 / x.torch2)),
      pipeline_over_torch2: median(perRound.map((x) => x.pipeline / x.torch2)),
      bare_pipeline_over_torch2: median(perRound.map((x) => x.pipeline_bare / x.torch2)),
    },
    state_every: TRAIN_COMMAND_DEFAULTS.stateEvery,
    shared_machine_note:
      'measured on a shared machine: other jobs ran at the same time, so rates drift between rounds; compare the ratios, medians of rounds in turn',
  };
}

export function formatTorchPeer(r: PeerResult): string {
  const range = (s: Setup) => {
    const v = r.per_round.map((x) => x[s]);
    return `${Math.min(...v).toFixed(0)}–${Math.max(...v).toFixed(0)}`;
  };
  const table = formatTable(
    ['setup', 'median tokens/s', 'range', 'kernels'],
    SETUPS.map((s) => [LABEL[s], r.median[s].toFixed(0), range(s), r.kernels[s] ?? 'PyTorch (OpenBLAS)']),
    `${r.model}; backend ${r.backend}; ${r.rounds} rounds in turn, ${r.iterations} timed iterations per child (the first untimed), tokens over their summed time`,
  );
  const x = (v: number) => `${v.toFixed(2)}x`;
  return (
    `${table}\n\nmedian of the rounds' ratios: Baton 1 process / PyTorch, 1 thread ${x(r.ratios.one_thread)}; 2 threads ${x(r.ratios.two_threads)}; ` +
    `Baton 2-stage pipeline on 2 cores / PyTorch 2 threads ${x(r.ratios.pipeline_over_torch2)} (recoverable), ${x(r.ratios.bare_pipeline_over_torch2)} (--max-restarts 0)\n${r.shared_machine_note}`
  );
}

if (require.main === module) {
  benchMain(
    'peer',
    'the same char-GPT trained by PyTorch and by Baton (1 process with 1 and 2 threads, a 2-stage pipeline on 2 cores), rounds in turn',
    [
      {
        name: 'rounds',
        type: 'int',
        metavar: 'R',
        help: 'rounds, each measuring every setup once',
        default: PEER_DEFAULTS.rounds,
      },
      {
        name: 'iterations',
        type: 'int',
        metavar: 'N',
        help: 'timed iterations per measurement (one more runs first, untimed)',
        default: PEER_DEFAULTS.iterations,
      },
      {
        name: 'layers',
        type: 'int',
        metavar: 'L',
        help: 'transformer blocks, at least 2',
        default: PEER_DEFAULTS.layers,
      },
    ],
    async (flags) => {
      const layers = positiveInt(flags, 'layers');
      if (layers !== undefined && layers < 2)
        throw new UsageError(
          `--layers must be at least 2 (the pipeline's 2 stages hold at least one block each), got ${layers}`,
        );
      const r = await benchTorchPeer({
        rounds: positiveInt(flags, 'rounds'),
        iterations: positiveInt(flags, 'iterations'),
        layers,
      });
      return flags.json ? r : formatTorchPeer(r);
    },
  );
}
