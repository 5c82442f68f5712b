// Profile of one training step by tfjs kernel (run: npm run bench -- profile
// [--backends wasm,cpu] [--microbatches M] [--layers L] [--kernels native|tfjs] [--threads N] [--json]).
// The whole char-GPT of the train bench (d 128, L blocks, 4 heads, seq 64, microbatch
// 16) in one process, as `baton train --stages 1` computes it: M microbatches of
// forward + backward, each one's gradients read out and folded in microbatch order,
// then one AdamW step. One microbatch first, unmeasured (the wasm code tiers up).
// Reported per backend: each kernel's calls and exclusive time, and the step's time by
// phase with the part spent outside kernels (tape, tidy scopes, disposal, the JS around
// the kernels) and the data movement (gradients out of tfjs, parameters back in), and
// each phase's CPU time, which unlike wall time does not grow while other processes hold
// the cores (so it stays comparable on a loaded machine; the threads' spinning counts).
//
// Not profiled: messaging and the pipeline (the train bench measures those).

import * as tf from '@tensorflow/tfjs';
import { performance } from 'perf_hooks';
import { formatTable } from '../cli/table';
import { loadBackend } from '../models/backend';
import { buildFullModel } from '../models/partition';
import { TrainConfig, batchFor, corpusFor, modelSpecFor, tokensPerMicrobatch } from '../models/train-config';
import { TRAIN_DEFAULTS } from '../job/defaults';
import { paramInfos, viewFloat32 } from '../models/tensor-io';
import { stepVariables } from '../models/adamw-step';
import { nativeAccumulate } from '../models/native-adamw';
import { AdamW } from '../policies/optim/adamw';
import { OrderedSum } from '../policies/optim/ordered-sum';
import { KernelTally, installKernelTimer } from './kernel-timer';
import { benchMain, positiveInt } from './bench-cli';
import { UsageError } from '../cli/args';
import { describeKernels, nativeKernelReport } from '../models/native-kernels';

interface Phase {
  phase: string;
  ms: number;
  kernel_ms: number;
  /** CPU time of the process (all its threads): unlike wall time, it does not grow while other processes hold the cores. */
  cpu_ms: number;
}

/** The process's CPU time so far (user + system), ms. */
const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

export interface BackendProfile {
  backend: string;
  kernels: string;
  microbatches: number;
  step_ms: number;
  step_cpu_ms: number;
  tokens_per_s: number;
  phases: Phase[];
  by_kernel: KernelTally[];
  kernel_calls: number;
}

/** Runs f as (part of) `phase`, adding its wall, kernel and CPU time to the phase's record. */
function phaseTimer(phases: Map<string, Phase>, kernelMs: () => number) {
  return <T>(phase: string, f: () => T): T => {
    const k0 = kernelMs();
    const c0 = cpuMs();
    const t0 = performance.now();
    try {
      return f();
    } finally {
      const p = phases.get(phase) ?? { phase, ms: 0, kernel_ms: 0, cpu_ms: 0 };
      p.ms += performance.now() - t0;
      p.cpu_ms += cpuMs() - c0;
      p.kernel_ms += kernelMs() - k0;
      phases.set(phase, p);
    }
  };
}

function profileOne(t: TrainConfig, M: number): Omit<BackendProfile, 'backend' | 'kernels'> {
  const corpus = corpusFor(t);
  const model = buildFullModel(modelSpecFor(t, corpus.vocabSize));
  const vars = model.params();
  const names = model.paramNames();
  const opt = new AdamW(paramInfos(model), { weightDecay: t.weightDecay });
  const timer = installKernelTimer(tf.getBackend());
  const phases = new Map<string, Phase>();
  const timed = phaseTimer(phases, () => timer.tallies().reduce((a, k) => a + k.ms, 0));
  try {
    const microbatch = (sum: OrderedSum, j: number) => {
      const b = batchFor(t, corpus, 'train', 0, j);
      const x = tf.tensor(b.inputs, [...b.inputShape], 'int32');
      const y = tf.tensor(b.targets, [...b.targetShape], 'int32');
      const r = timed('forward + backward', () => model.backward(x, null, { targets: y, lossScale: 1 / M }));
      timed('gradients out of tfjs, ordered sum', () =>
        sum.add(
          j,
          r.paramGrads.map((g) => viewFloat32(g)),
        ),
      );
      timed('dispose', () => tf.dispose([...r.paramGrads, x, y]));
    };
    // Training reuses a chunk's sums from one iteration to the next (compute/sync-chunks.ts).
    const sum = new OrderedSum(
      vars.map((v) => v.size),
      M,
      nativeAccumulate(),
    );
    microbatch(sum, 0); // tier-up, unmeasured
    sum.reset();
    phases.clear();
    timer.reset();
    const c0 = cpuMs();
    const t0 = performance.now();
    for (let j = 0; j < M; j++) microbatch(sum, j);
    timed('AdamW step, parameters into tfjs', () => stepVariables(vars, names, opt, sum, t.lr));
    const stepMs = performance.now() - t0;
    const stepCpuMs = cpuMs() - c0;
    const byKernel = timer.tallies();
    return {
      microbatches: M,
      step_ms: stepMs,
      step_cpu_ms: stepCpuMs,
      tokens_per_s: (M * tokensPerMicrobatch(t)) / (stepMs / 1000),
      phases: [...phases.values()],
      by_kernel: byKernel,
      kernel_calls: byKernel.reduce((a, k) => a + k.calls, 0),
    };
  } finally {
    timer.remove();
    model.dispose();
  }
}

export async function benchComputeProfile(
  o: { backends?: string[]; microbatches?: number; layers?: number } = {},
): Promise<BackendProfile[]> {
  const t: TrainConfig = {
    ...TRAIN_DEFAULTS,
    model: 'gpt',
    microbatchSize: 16,
    seq: 64,
    layers: o.layers ?? 8,
    width: 128,
    heads: 4,
    totalIterations: 1,
    valBatches: 1,
  };
  const out: BackendProfile[] = [];
  for (const b of o.backends ?? ['wasm', 'cpu']) {
    const report = await loadBackend({ force: b });
    out.push({
      backend: report.backend,
      kernels: describeKernels(nativeKernelReport()),
      ...profileOne(t, o.microbatches ?? 2),
    });
  }
  return out;
}

export function formatComputeProfile(profiles: readonly BackendProfile[], top = 20): string {
  return profiles
    .map((p) => {
      const pct = (ms: number) => `${((100 * ms) / p.step_ms).toFixed(1)}%`;
      const kernelTotal = p.by_kernel.reduce((a, k) => a + k.ms, 0);
      const head =
        `backend ${p.backend}; kernels: ${p.kernels}; ${p.microbatches} microbatches + AdamW: ${p.step_ms.toFixed(0)} ms (${p.tokens_per_s.toFixed(0)} tokens/s), ${p.step_cpu_ms.toFixed(0)} ms of CPU; ` +
        `${p.kernel_calls} kernel calls, ${kernelTotal.toFixed(0)} ms in kernels, ${(p.step_ms - kernelTotal).toFixed(0)} ms outside (${pct(p.step_ms - kernelTotal)})`;
      const phases = formatTable(
        ['phase', 'ms', 'share', 'in kernels ms', 'outside kernels ms', 'cpu ms'],
        p.phases.map((x) => [
          x.phase,
          x.ms.toFixed(1),
          pct(x.ms),
          x.kernel_ms.toFixed(1),
          (x.ms - x.kernel_ms).toFixed(1),
          x.cpu_ms.toFixed(1),
        ]),
        head,
      );
      const shown = p.by_kernel.slice(0, top);
      const rest = p.by_kernel.slice(top);
      const rows = shown.map((k) => [
        k.kernel,
        String(k.calls),
        k.ms.toFixed(1),
        pct(k.ms),
        ((k.ms * 1000) / k.calls).toFixed(0),
      ]);
      if (rest.length > 0)
        rows.push([
          `(${rest.length} others)`,
          String(rest.reduce((a, k) => a + k.calls, 0)),
          rest.reduce((a, k) => a + k.ms, 0).toFixed(1),
          pct(rest.reduce((a, k) => a + k.ms, 0)),
          '',
        ]);
      const kernels = formatTable(
        ['kernel', 'calls', 'ms', 'share of step', 'µs per call'],
        rows,
        'by kernel (exclusive time)',
      );
      return `${phases}\n\n${kernels}`;
    })
    .join('\n\n');
}

if (require.main === module) {
  benchMain(
    'profile',
    "one training step of the train bench's char-GPT by tfjs kernel (calls, exclusive time) and by phase, time outside kernels, per backend",
    [
      {
        name: 'backends',
        type: 'string',
        metavar: 'LIST',
        help: 'comma-separated backends to profile in turn',
        default: 'wasm,cpu',
      },
      {
        name: 'microbatches',
        type: 'int',
        metavar: 'M',
        help: 'microbatches in the measured step (the cpu backend takes seconds per microbatch)',
        default: 2,
      },
      { name: 'layers', type: 'int', metavar: 'L', help: 'transformer blocks', default: 8 },
    ],
    async (flags) => {
      const backends = String(flags.backends)
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s !== '');
      if (backends.length === 0) throw new UsageError('--backends names no backend');
      const r = await benchComputeProfile({
        backends,
        microbatches: positiveInt(flags, 'microbatches'),
        layers: positiveInt(flags, 'layers'),
      });
      return flags.json ? r : formatComputeProfile(r);
    },
  );
}
