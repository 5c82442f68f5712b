// `baton calibrate`: this machine's compute speed on the backend it loads, in GFLOP/s (a
// matMul and a reference stage's forward + backward; models/calibrate.ts).

import { CALIBRATE_DEFAULTS } from '../job/defaults';
import { describeBackend, loadBackend } from '../models/backend';
import { calibrate } from '../models/calibrate';
import { FlagSpec, HELP_FLAG, helpText, msFlag, parseFlags, printedHelp } from './args';
import { formatTable } from './table';

const CALIBRATE_FLAGS: readonly FlagSpec[] = [
  {
    name: 'backend',
    type: 'string',
    metavar: 'NAME',
    help: 'force a tfjs backend: tfjs-node-gpu, tfjs-node, wasm, cpu (or env BATON_BACKEND)',
  },
  {
    name: 'budget-ms',
    type: 'int',
    metavar: 'MS',
    help: 'time each measurement repeats for, after one unmeasured run (at least 3 runs)',
    default: CALIBRATE_DEFAULTS.budgetMs,
  },
  { name: 'json', type: 'bool', help: 'print one JSON object' },
  HELP_FLAG,
];

export const CALIBRATE_HELP = helpText(
  'calibrate',
  `measure this machine's compute speed in GFLOP/s: a ${CALIBRATE_DEFAULTS.matmulSize}x${CALIBRATE_DEFAULTS.matmulSize} matMul and the forward + backward of a reference stage (${CALIBRATE_DEFAULTS.stageBlocks} char-GPT blocks, d ${CALIBRATE_DEFAULTS.width}, seq ${CALIBRATE_DEFAULTS.seq}, ${CALIBRATE_DEFAULTS.batch} sequences)`,
  'baton calibrate [--backend NAME] [--budget-ms MS] [--json]',
  CALIBRATE_FLAGS,
);

export async function calibrateCommand(argv: readonly string[], out: (s: string) => void): Promise<number> {
  const { flags } = parseFlags(argv, CALIBRATE_FLAGS, 'calibrate');
  if (printedHelp(flags, CALIBRATE_HELP, out)) return 0;
  const budgetMs = msFlag(flags.budgetMs, 'calibrate', 'budget-ms');
  const report = await loadBackend({ force: flags.backend as string | undefined });
  const c = calibrate({ ...CALIBRATE_DEFAULTS, budgetMs });
  if (flags.json) {
    out(JSON.stringify({ ...c, backend: report.backend }));
    return 0;
  }
  const row = (what: string, m: { gflops: number; ms: number; runs: number }) => [
    what,
    m.gflops.toFixed(2),
    m.ms.toFixed(2),
    String(m.runs),
  ];
  out(
    formatTable(
      ['measurement', 'GFLOP/s', 'median ms', 'runs'],
      [
        row(`matMul ${c.matmul.size}x${c.matmul.size}`, c.matmul),
        row(`stage F+B (${c.stage.blocks} blocks, d ${c.stage.width}, ${c.stage.batch}x${c.stage.seq})`, c.stage),
      ],
      describeBackend(report),
    ),
  );
  return 0;
}
