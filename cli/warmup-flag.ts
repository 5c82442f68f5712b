// --warmup-iterations, of sim and run: iterations run first and left out of the
// statistics, checked the same way by both, so the same flags give comparable figures.

import { JobConfig } from '../job/config';
import { FlagSpec, ParsedFlags, UsageError } from './args';

/** The flag with a command's default (job/defaults.ts: none for sim, one for run). */
export function warmupFlag(defaultIterations: number): FlagSpec {
  return {
    name: 'warmup-iterations',
    type: 'int',
    metavar: 'W',
    help: 'iterations run first and left out of the statistics (JIT, connections); none with --mode async',
    default: defaultIterations,
  };
}

/** The config with the warm-up the flags give (an asynchronous stream has none). */
export function withWarmup(cfg: JobConfig, flags: ParsedFlags, given: ReadonlySet<string>, command: string): JobConfig {
  const w = flags.warmupIterations as number;
  if (!Number.isInteger(w) || w < 0)
    throw new UsageError(`${command}: --warmup-iterations must be an integer >= 0, got ${w}`);
  if (cfg.mode === 'async' && given.has('warmupIterations') && w > 0)
    throw new UsageError(
      `${command}: asynchronous mode runs one stream of microbatches; it has no warm-up iteration (drop --warmup-iterations)`,
    );
  return { ...cfg, warmupIterations: cfg.mode === 'async' ? 0 : w };
}
