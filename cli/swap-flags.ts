// --swap-at and --swap-modules, of sim, run and train: scripted policy swaps, and the
// module paths a swap (scripted or from `baton policy set`) may load.

import { SWAP_DEFAULTS } from '../job/defaults';
import { SwapOptions } from '../job/policy-control';
import { SWAP_SCHEDULE_GRAMMAR, parseSwapSchedule } from '../policies/swap-schedule';
import { FlagSpec, ParsedFlags } from './args';

export const SWAP_FLAGS: readonly FlagSpec[] = [
  {
    name: 'swap-at',
    type: 'string',
    metavar: 'SCHEDULE',
    help: `scripted policy swaps, ${SWAP_SCHEDULE_GRAMMAR}: at the start of that iteration (e.g. it=2:bf,it=5:hint:1f1b)`,
    default: SWAP_DEFAULTS.swapAt,
  },
  {
    name: 'swap-modules',
    type: 'string',
    metavar: 'A.js,B.js',
    help: 'policy module paths a swap may load (baton policy set); --swap-at modules are allowed by naming them',
    default: SWAP_DEFAULTS.swapModules,
  },
];

/** run and train: the job's key from a file, so a second process holding it (baton policy) can reach the job. */
export const JOB_KEY_FILE_FLAG: FlagSpec = {
  name: 'key-file',
  type: 'string',
  metavar: 'FILE',
  help: 'over NATS: seal the job under the key in FILE (baton auth key FILE writes one), not one drawn for this launch, so baton policy --key-file FILE can reach it',
};

export function swapOptionsFromFlags(flags: ParsedFlags): SwapOptions | undefined {
  const schedule = parseSwapSchedule(String(flags.swapAt ?? ''));
  const modules = String(flags.swapModules ?? '')
    .split(',')
    .map((m) => m.trim())
    .filter((m) => m !== '');
  return schedule.length === 0 && modules.length === 0 ? undefined : { schedule, modules };
}
