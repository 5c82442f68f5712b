// `baton inspect --job J`: a live view of a running job from its own subjects (the
// stages' stats, the coordinator's reports), redrawn a few times a second on a terminal,
// printed as plain lines once a second otherwise. It only listens: the job does not know
// it is watched, and Ctrl-C ends the view (exit 0), not the job.

import { SWAP_DEFAULTS } from '../job/defaults';
import { NatsBus } from '../transport/nats-bus';
import { checkJobName, jobWildcard } from '../transport/subjects';
import { FlagSpec, HELP_FLAG, UsageError, parseFlags, printedHelp } from './args';
import { RUNNING_JOB_FLAGS, natsAccessOf, natsFlag } from './nats-flag';
import { newInspectState, render, takeMessage } from './inspect-view';

const INSPECT_FLAGS: readonly FlagSpec[] = [
  HELP_FLAG,
  ...RUNNING_JOB_FLAGS,
  { name: 'duration', type: 'number', metavar: 'S', help: 'stop after S seconds (0 = until Ctrl-C)', default: 0 },
  { name: 'plain', type: 'bool', help: 'print plain lines even on a terminal' },
];

export const INSPECT_HELP = `Usage: baton inspect --job J [--nats URL]

A live view of a running job, from the job's own stats and report subjects: per stage, the
policy in force (and swaps waiting), iteration, current task, ready set (F | B | W), buffer
occupancy against the limit, tasks/s, messages/s and bytes/s (both ways), the share of time
blocked; per job, iteration, elapsed time and, when training, the loss. Redraws every
${SWAP_DEFAULTS.inspectRefreshMs} ms on a terminal; prints plain lines every ${SWAP_DEFAULTS.inspectPlainMs} ms when stdout is not one.
Stages publish stats on the real clock over NATS only. Ctrl-C exits 0 and leaves the job running.

Options:
${INSPECT_FLAGS.map((f) => `  ${`--${f.name}${f.type === 'bool' ? '' : ` ${f.metavar ?? 'X'}`}`.padEnd(16)} ${f.help}${f.default !== undefined ? ` (default ${f.default})` : ''}`).join('\n')}
`;

export async function inspectCommand(argv: readonly string[], out: (s: string) => void): Promise<number> {
  const { flags } = parseFlags(argv, INSPECT_FLAGS, 'inspect');
  if (printedHelp(flags, INSPECT_HELP, out)) return 0;
  if (!flags.job) throw new UsageError('inspect: --job J is required');
  const job = checkJobName(String(flags.job));
  const seconds = flags.duration as number;
  if (!(seconds >= 0 && seconds <= 2_000_000))
    throw new UsageError(`inspect: --duration must be from 0 to 2000000 seconds, got ${seconds}`);
  const url = natsFlag(flags.nats, 'inspect');
  const tty = process.stdout.isTTY === true && !flags.plain;
  const access = natsAccessOf(flags, 'inspect', url);
  const bus = await NatsBus.connect(url, { name: 'baton-inspect', access: access.access, accessNames: access.names });
  const state = newInspectState(job);
  bus.subscribe(jobWildcard(job), (subj, data) => takeMessage(state, subj, data, performance.now()));
  await bus.flush();
  const draw = () => {
    const lines = render(state, performance.now());
    if (state.stages.size === 0) lines.push(`(waiting for stats of job ${job} on ${bus.url})`);
    // Home, the lines each cleared to its end, then the rest of the screen cleared.
    if (tty) process.stdout.write(`\x1b[H${lines.map((l) => `${l}\x1b[K`).join('\n')}\n\x1b[J`);
    else out(`${lines.join('\n')}\n`);
  };
  if (tty) process.stdout.write('\x1b[?25l\x1b[2J');
  const timer = setInterval(draw, tty ? SWAP_DEFAULTS.inspectRefreshMs : SWAP_DEFAULTS.inspectPlainMs);
  let stop: () => void = () => {};
  const stopped = new Promise<void>((r) => (stop = r));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  const limit = seconds > 0 ? setTimeout(stop, seconds * 1000) : null;
  await Promise.race([stopped, bus.lost().then(() => undefined)]);
  clearInterval(timer);
  if (limit) clearTimeout(limit);
  process.removeListener('SIGINT', stop);
  process.removeListener('SIGTERM', stop);
  draw();
  if (tty) process.stdout.write('\x1b[?25h');
  await bus.close();
  return 0;
}
