// The Node flags of the stage processes a launcher starts (`baton run --processes
// per-stage`, the default over NATS). Several stage processes share a machine's cores,
// and V8's parallel and concurrent GC wakes helper threads on every collection; those
// wake-ups compete with the pipeline's message handling. A stage's heap is small (tensor
// data lives in typed arrays and the backend's memory), so collecting on the main thread
// costs less than the wake-ups it saves (bench/README.md, "The runtime's overhead on the real clock").

import { UsageError } from './args';

export const DEFAULT_STAGE_NODE_FLAGS: readonly string[] = ['--single-threaded-gc'];

/** The environment variable that replaces the defaults: space-separated flags, empty for none. */
export const STAGE_NODE_FLAGS_ENV = 'BATON_STAGE_NODE_FLAGS';

/** The flags stage processes start with: the environment's, when it sets them, else the defaults. */
export function stageNodeFlags(env: NodeJS.ProcessEnv = process.env): readonly string[] {
  const given = env[STAGE_NODE_FLAGS_ENV];
  if (given === undefined) return DEFAULT_STAGE_NODE_FLAGS;
  const flags = given.split(/\s+/).filter((f) => f.length > 0);
  const bad = flags.find((f) => !f.startsWith('-'));
  if (bad !== undefined)
    throw new UsageError(
      `${STAGE_NODE_FLAGS_ENV}: every word must be a Node flag starting with -, got ${JSON.stringify(bad)} (space-separated flags, a flag's value joined with =, e.g. "--single-threaded-gc --max-old-space-size=8192"; empty for none)`,
    );
  return flags;
}

/** The Environment part of `run --help` and `train --help`. */
export const STAGE_NODE_FLAGS_HELP = `\nEnvironment:\n  ${STAGE_NODE_FLAGS_ENV.padEnd(28)} Node flags of the stage processes this command starts, space-separated, a flag's value joined with = (default ${DEFAULT_STAGE_NODE_FLAGS.join(' ')}; empty for none)\n`;
