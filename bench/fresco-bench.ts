// `npm run bench -- fresco [--quick | --preset small|paper] [--report-only]`: the FRESCO
// comparison of issue #27 (what runs: fresco-sweep.ts; what it reports: sweep-report.ts).
// Finished runs are cached under out/fresco-sweep/<preset>/runs and skipped on a re-run;
// the report (report.md, report.json, final-loss.svg, curves-P<n>.svg) is written beside.

import * as fs from 'fs';
import * as path from 'path';
import { loadBackend } from '../models/backend';
import { UsageError } from '../cli/args';
import { benchMain } from './bench-cli';
import { RunResult, SWEEP_PRESETS, corpusPath, runSweep } from './fresco-sweep';
import { analyse, formatReport } from './sweep-report';
import { excessRows, formatExcess } from './sweep-excess';
import { curvesSvg, finalLossSvg } from './sweep-svg';

function cachedRuns(dir: string): RunResult[] {
  const runs = path.join(dir, 'runs');
  if (!fs.existsSync(runs)) return [];
  return fs
    .readdirSync(runs)
    .filter((f) => f.endsWith('.json'))
    .map((f) => JSON.parse(fs.readFileSync(path.join(runs, f), 'utf8')) as RunResult);
}

export async function benchFresco(o: {
  preset: string;
  data?: string;
  out?: string;
  reportOnly?: boolean;
  phases?: string;
  /** Train only these of the preset's depths (two processes can split a sweep over one cache). */
  depths?: readonly number[];
}) {
  const p = SWEEP_PRESETS[o.preset];
  if (!p)
    throw new UsageError(`unknown preset ${JSON.stringify(o.preset)}; known: ${Object.keys(SWEEP_PRESETS).join(', ')}`);
  const unknown = (o.depths ?? []).filter((d) => !p.depths.includes(d));
  if (unknown.length > 0)
    throw new UsageError(`--depths ${unknown.join(',')}: not depths of preset ${p.name} (${p.depths.join(', ')})`);
  const dir = path.join(o.out ?? path.join('out', 'fresco-sweep'), p.name);
  const t0 = performance.now();
  let backend = 'not loaded (report only)';
  if (!o.reportOnly) {
    backend = (await loadBackend()).backend;
    await runSweep(
      o.depths ? { ...p, depths: p.depths.filter((d) => o.depths!.includes(d)) } : p,
      dir,
      corpusPath(o.data),
      (s) => process.stderr.write(`${((performance.now() - t0) / 60000).toFixed(1)} min: ${s}\n`),
      o.phases,
    );
  }
  const runs = cachedRuns(dir);
  const a = analyse(p, runs);
  const excess = excessRows(p, runs);
  const model = `MLP LM, ${p.layers} blocks of width ${p.width}, ${p.rows} rows per microbatch, ${p.updates} updates (${Math.round(100 * p.warmupFraction)}% warm-up, cosine to 0.1x)`;
  const text =
    `FRESCO sweep, preset ${p.name}: ${model}; async 1F1B, kept activations; ${runs.length} runs cached in ${dir}; backend ${backend}; ` +
    `train-time ${(runs.reduce((s, r) => s + r.seconds, 0) / 60).toFixed(1)} min in total\n\n${formatReport(p, a)}\n\n${formatExcess(p, excess)}`;
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'report.md'), `${text}\n`);
  fs.writeFileSync(
    path.join(dir, 'report.json'),
    JSON.stringify({ preset: p, ...a, excess, curves: undefined, referenceCurve: undefined }, null, 1),
  );
  fs.writeFileSync(
    path.join(dir, 'final-loss.svg'),
    finalLossSvg(`Final loss vs P (${model})`, a.referenceRow.finalLoss.median, a.rows, a.controls),
  );
  for (const P of [...new Set(a.curves.map((c) => c.stages))])
    fs.writeFileSync(
      path.join(dir, `curves-P${P}.svg`),
      curvesSvg(
        `P=${P}: training loss, seed ${p.seeds[0]} at each method's LR (${model})`,
        a.referenceCurve,
        a.curves.filter((c) => c.stages === P),
      ),
    );
  return { text, dir, analysis: { ...a, excess, curves: undefined, referenceCurve: undefined } };
}

function parseDepths(s: string | undefined): number[] | undefined {
  if (s === undefined) return undefined;
  const ds = s.split(',').map((x) => Number(x.trim()));
  if (ds.some((d) => !Number.isInteger(d) || d < 1))
    throw new UsageError(`--depths takes positive integers separated by commas, got ${JSON.stringify(s)}`);
  return ds;
}

if (require.main === module) {
  benchMain(
    'fresco',
    "the FRESCO comparison: the paper's baselines x P, LR sweep, seeds, the P=1 projection control, alpha sweep; cached and resumable",
    [
      {
        name: 'quick',
        type: 'bool',
        help: 'the CI-size preset (8 blocks, P 1-4, 2 seeds; minutes): same as --preset quick',
      },
      {
        name: 'preset',
        type: 'string',
        metavar: 'NAME',
        help: `quick, small (16 blocks, P 1-16, 3 seeds), medium (32 blocks of width 32, 160 rows, P 1-32, 500 updates) or paper (32 blocks of width 64, 128 rows, P 1-32); default small`,
      },
      { name: 'report-only', type: 'bool', help: 'train nothing: write the report from the runs already cached' },
      {
        name: 'phases',
        type: 'string',
        metavar: 'ABC',
        help: 'A: every method and the control at the first LR, all seeds; B: the rest of the LR sweep; C: the alpha sweep (default ABC)',
      },
      {
        name: 'depths',
        type: 'string',
        metavar: 'P,P,...',
        help: "train only these of the preset's depths (the report covers every cached run); two processes over one --out can split a sweep",
      },
      {
        name: 'data',
        type: 'string',
        metavar: 'FILE',
        help: 'the corpus, any UTF-8 text file (default: ../shared/data/tinyshakespeare.txt beside this checkout)',
      },
      {
        name: 'out',
        type: 'string',
        metavar: 'DIR',
        help: 'where the cache and the report go (default out/fresco-sweep; the preset names a subdirectory)',
      },
    ],
    async (flags) => {
      if (flags.quick && flags.preset !== undefined && flags.preset !== 'quick')
        throw new UsageError('--quick and --preset name two presets');
      const phases = (flags.phases as string | undefined) ?? 'ABC';
      if (!/^[ABC]+$/.test(phases))
        throw new UsageError(`--phases takes letters of ABC, got ${JSON.stringify(phases)}`);
      const r = await benchFresco({
        preset: flags.quick ? 'quick' : ((flags.preset as string | undefined) ?? 'small'),
        data: flags.data as string | undefined,
        out: flags.out as string | undefined,
        reportOnly: flags.reportOnly === true,
        phases,
        depths: parseDepths(flags.depths as string | undefined),
      });
      return flags.json ? { dir: r.dir, ...r.analysis } : r.text;
    },
  );
}
