#!/usr/bin/env node
// The `baton` command.

import { UsageError } from './args';
import { NODE_HELP, nodeCommand } from './node-command';
import { RUN_HELP, runCommand } from './run';
import { SIM_HELP, simCommand } from './sim';
import { TAP_HELP, tapCommand } from './tap';
import { TRAIN_HELP, trainCommand } from './train';
import { TRACE_HELP, traceCommand } from './trace-command';

type Command = { summary: string; run: (argv: readonly string[], out: (s: string) => void) => Promise<number>; help: string };

const COMMANDS: Record<string, Command> = {
  sim: { summary: 'simulate a pipeline on the virtual clock (same actors, emulated compute)', run: simCommand, help: SIM_HELP },
  run: { summary: 'run a pipeline on the real clock over NATS (one process per stage) or in one process', run: runCommand, help: RUN_HELP },
  train: { summary: 'train a model with a synchronous pipeline (real compute, TensorFlow.js)', run: trainCommand, help: TRAIN_HELP },
  node: { summary: 'start a node agent that hosts stage actors for jobs over NATS', run: nodeCommand, help: NODE_HELP },
  trace: { summary: 'inspect a trace file: gantt (SVG chart), check (schema), summary', run: traceCommand, help: TRACE_HELP },
  tap: { summary: 'print the live decoded message flows of a job (like nats sub)', run: tapCommand, help: TAP_HELP },
};

const USAGE_ERRORS = new Set(['UsageError', 'ShapeError', 'UnknownPolicyError', 'ProfileError', 'BackpressureLimitError', 'PolicyModuleError', 'SubjectError', 'CheckpointError', 'CorpusError', 'ModelConfigError', 'PartitionError', 'BackendError']);

function usage(): string {
  const rows = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(8)} ${c.summary}`);
  return `baton — readiness-first pipeline-parallel training runtime\n\nUsage: baton <command> [options]   (baton <command> --help for options)\n\nCommands:\n${rows.join('\n')}\n`;
}

export async function main(argv: readonly string[], out: (s: string) => void = (s) => process.stdout.write(s.endsWith('\n') ? s : `${s}\n`)): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    out(usage());
    return name ? 0 : 2;
  }
  const cmd = COMMANDS[name];
  if (!cmd) {
    process.stderr.write(`baton: unknown command ${JSON.stringify(name)}\n\n${usage()}`);
    return 2;
  }
  try {
    return await cmd.run(rest, out);
  } catch (err) {
    const e = err as Error;
    process.stderr.write(`baton ${name}: ${e.name}: ${e.message}\n`);
    if (process.env.BATON_DEBUG && e.stack) process.stderr.write(`${e.stack}\n`);
    return e instanceof UsageError || USAGE_ERRORS.has(e.name) ? 2 : 1;
  }
}

if (require.main === module) {
  main(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
  }, (err) => {
    process.stderr.write(`baton: ${(err as Error).stack ?? err}\n`);
    process.exitCode = 1;
  });
}
