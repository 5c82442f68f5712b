#!/usr/bin/env node
// The `baton` command.

import { exitStatusOf } from '../base/errors';

type CommandRun = (argv: readonly string[], out: (s: string) => void) => Promise<number>;
// Each command's module is loaded only when it runs: a node agent or an emulated run
// then starts without loading TensorFlow.js, which only train needs.
type Command = { summary: string; load: () => CommandRun };

const COMMANDS: Record<string, Command> = {
  sim: {
    summary: 'simulate a pipeline on the virtual clock (same actors, emulated compute)',
    load: () => (require('./sim') as typeof import('./sim')).simCommand,
  },
  run: {
    summary: 'run a pipeline on the real clock over NATS (one process per stage) or in one process',
    load: () => (require('./run') as typeof import('./run')).runCommand,
  },
  train: {
    summary: 'train a model with a pipeline, synchronous or asynchronous (real compute, TensorFlow.js)',
    load: () => (require('./train-command') as typeof import('./train-command')).trainCommand,
  },
  calibrate: {
    summary: "measure this machine's compute speed in GFLOP/s (a matMul and a reference stage's forward + backward)",
    load: () => (require('./calibrate') as typeof import('./calibrate')).calibrateCommand,
  },
  node: {
    summary: 'start a node agent that hosts stage actors for jobs over NATS',
    load: () => (require('./node-command') as typeof import('./node-command')).nodeCommand,
  },
  nodes: {
    summary: 'list the node agents of a NATS system (the baton-node service) with their measured capabilities',
    load: () => (require('./nodes-command') as typeof import('./nodes-command')).nodesCommand,
  },
  trace: {
    summary: 'inspect a trace file: gantt (SVG chart), check (schema), summary',
    load: () => (require('./trace-command') as typeof import('./trace-command')).traceCommand,
  },
  auth: {
    summary: 'write credentials: a key file for node agents started by hand and their launchers',
    load: () => (require('./auth-command') as typeof import('./auth-command')).authCommand,
  },
  policy: {
    summary: "swap a running job's policy (policy set) or show it (policy get)",
    load: () => (require('./policy-command') as typeof import('./policy-command')).policyCommand,
  },
  inspect: {
    summary: 'a live view of a running job: per stage task, ready set, buffers, rates, policy',
    load: () => (require('./inspect') as typeof import('./inspect')).inspectCommand,
  },
  report: {
    summary: 'write one self-contained HTML report of a run from its --json result and traces',
    load: () => (require('./report/report-command') as typeof import('./report/report-command')).reportCommand,
  },
  tap: {
    summary: 'print the live decoded message flows of a job (like nats sub)',
    load: () => (require('./tap') as typeof import('./tap')).tapCommand,
  },
};

/** 2 for bad flags or input, 1 for a job that failed: what the error's class declares. */
export function exitCodeFor(e: Error): number {
  return exitStatusOf(e);
}

function usage(): string {
  const rows = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(8)} ${c.summary}`);
  return `baton — readiness-first pipeline-parallel training runtime\n\nUsage: baton <command> [options]   (baton <command> --help for options)\n\nCommands:\n${rows.join('\n')}\n`;
}

export async function main(
  argv: readonly string[],
  out: (s: string) => void = (s) => process.stdout.write(s.endsWith('\n') ? s : `${s}\n`),
): Promise<number> {
  const [name, ...rest] = argv;
  // `baton help run` is `baton run --help`, and `baton help trace gantt` is `baton trace gantt --help`.
  if (name === 'help' && rest.length > 0) return main([...rest, '--help'], out);
  if (name === '--help' || name === '-h' || name === 'help') {
    out(usage());
    return 0;
  }
  if (!name) {
    process.stderr.write(`baton: a command is required\n\n${usage()}`);
    return 2;
  }
  // Own keys only: `constructor` or `__proto__` is no command.
  const cmd = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (!cmd) {
    process.stderr.write(`baton: unknown command ${JSON.stringify(name)}\n\n${usage()}`);
    return 2;
  }
  try {
    return await cmd.load()(rest, out);
  } catch (err) {
    const e = err as Error;
    process.stderr.write(`baton ${name}: ${e.name}: ${e.message}\n`);
    if (process.env.BATON_DEBUG && e.stack) process.stderr.write(`${e.stack}\n`);
    return exitCodeFor(e);
  }
}

if (require.main === module) {
  // A reader that went away (`baton run … | head`) is not an error of the run: stop quietly.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    process.stderr.write(`baton: cannot write to stdout: ${err.message}\n`);
    process.exit(1);
  });
  // Nor is a reader of stderr that went away (`baton run --json 2>&1 >out.json | head -1`):
  // the progress and warnings written there are dropped, and the command goes on to its
  // result on stdout, instead of dying of the write error.
  process.stderr.on('error', () => {});
  // Once the command is done, nothing of ours keeps the process alive; a handle a library
  // leaked must not either (nats.js leaves its socket open when a connect to something that
  // is not a NATS server times out), so a finished command that has not exited in 2 s does.
  const exitSoon = (code: number) => {
    process.exitCode = code;
    setTimeout(() => process.exit(code), 2000).unref();
  };
  main(process.argv.slice(2)).then(exitSoon, (err) => {
    process.stderr.write(`baton: ${(err as Error).stack ?? err}\n`);
    exitSoon(1);
  });
}
