// `baton tap`: print the live, decoded message flows of a job (like `nats sub` for
// Baton): subject, kind, task, bytes and latency of every message (on the machine's
// monotonic clock, so latency is meaningful for senders on the same host); trace
// batches are summarized. Malformed messages are printed as such, never fatal.

import { monotonicNow } from '../base/clock';
import { BatonEvent } from '../stage/events';
import { decodeEnvelope, decodeValue } from '../transport/codec';
import { Envelope } from '../transport/envelope';
import { NatsBus, NatsBusError } from '../transport/nats-bus';
import { checkJobName, jobWildcard, parseSubject } from '../transport/subjects';
import { formatTask } from '../policies/task';
import { HELP_FLAG, FlagSpec, UsageError, helpText, parseFlags, printedHelp } from './args';
import { NATS_ACCESS_FLAGS, NATS_URL_FORMS, natsAccessOf, natsUrlOf } from './nats-flag';
import { TAP_COMMAND_DEFAULTS } from '../job/defaults';
import { printable } from './table';

export { printable };

const TAP_FLAGS: readonly FlagSpec[] = [
  {
    name: 'nats',
    type: 'string',
    metavar: 'URL',
    help: `NATS server(s): ${NATS_URL_FORMS} (default: BATON_NATS_URL or NATS_URL from the environment, else ${TAP_COMMAND_DEFAULTS.nats})`,
  },
  ...NATS_ACCESS_FLAGS,
  { name: 'job', type: 'string', metavar: 'J', help: 'job to watch (required unless --all)' },
  { name: 'all', type: 'bool', help: 'watch every Baton subject (baton.>)' },
  { name: 'count', type: 'int', metavar: 'N', help: 'stop after N messages (0 = no limit)', default: 0 },
  { name: 'timeout', type: 'number', metavar: 'S', help: 'stop after S seconds (0 = no limit)', default: 0 },
  { name: 'json', type: 'bool', help: 'one JSON object per line' },
  HELP_FLAG,
];

export const TAP_HELP = helpText(
  'tap',
  'print the live decoded message flows of a job',
  'baton tap [--nats URL] --job J [--count N] [--timeout S] [--json]',
  TAP_FLAGS,
);

export interface TapLine {
  subject: string;
  kind: string;
  task?: string;
  iteration?: number;
  src?: number;
  dst?: number;
  bytes: number;
  latency_ms?: number;
  events?: number;
  /** What a control, policy or stats message says (a control verb, a swap, a stage's policy). */
  detail?: string;
  error?: string;
}

function taskOf(e: Envelope): string | undefined {
  if (e.kind === 'activation' || e.kind === 'data') return formatTask({ kind: 'F', mb: e.mb, chunk: e.chunk });
  if (e.kind === 'gradient') return formatTask({ kind: 'B', mb: e.mb, chunk: e.chunk });
  return undefined;
}

/** Decode one bus message into a tap line; never throws. */
export function tapLine(subject: string, data: Uint8Array, now = monotonicNow()): TapLine {
  const parts = parseSubject(subject);
  // A node agent's subjects (baton._nodes.…, or baton.<job>.node.… for agents started for a job)
  // and a job's name claim (baton.<job>.claim…) carry plain maps, not envelopes.
  const nodeOrClaim = parts?.job === '_nodes' || parts?.kind === 'node' || parts?.kind === 'claim';
  if (parts?.kind === 'trace' || nodeOrClaim) {
    try {
      const v = decodeValue(data) as { events?: BatonEvent[]; verb?: string };
      if (Array.isArray(v?.events)) return { subject, kind: 'trace', bytes: data.byteLength, events: v.events.length };
      if (!nodeOrClaim)
        return {
          subject,
          kind: 'malformed',
          bytes: data.byteLength,
          error: 'a trace batch must be a map with an events list',
        };
      // A launcher's claim of its job name (job/job-claim.ts): a question or an answer.
      if (parts.kind === 'claim') return { subject, kind: 'job-claim', bytes: data.byteLength };
      return { subject, kind: String(v?.verb ?? 'node'), bytes: data.byteLength };
    } catch (err) {
      return { subject, kind: 'malformed', bytes: data.byteLength, error: (err as Error).message };
    }
  }
  if (parts?.kind === 'policy' || parts?.kind === 'stats') return controlLine(subject, parts.kind, data);
  try {
    const e = decodeEnvelope(data);
    const verb = e.kind === 'control' && typeof e.body?.verb === 'string' ? e.body.verb : null;
    return {
      subject,
      kind: e.kind,
      ...(verb === null ? {} : { detail: `${verb}${verb === 'swap' ? ` ${swapText(e.body!)}` : ''}` }),
      task: taskOf(e),
      iteration: e.iteration,
      src: e.src,
      dst: e.dst,
      bytes: e.bytes || data.byteLength,
      latency_ms: now - e.sentAt,
    };
  } catch (err) {
    return { subject, kind: 'malformed', bytes: data.byteLength, error: (err as Error).message };
  }
}

function swapText(b: Readonly<Record<string, unknown>>): string {
  const to = b.consistency !== undefined ? `consistency ${String(b.consistency)}` : String(b.policy);
  return `#${String(b.swap)} -> ${to}${b.atIteration !== undefined ? ` at it${String(b.atIteration)}` : ''}`.slice(
    0,
    200,
  );
}

/** A policy control message (a swap request, an answer, a stage's ack) or a stage's stats, by its verb. */
function controlLine(subject: string, kind: string, data: Uint8Array): TapLine {
  try {
    const v = decodeValue(data) as Record<string, unknown>;
    const what =
      kind === 'stats'
        ? `stage ${String(v?.stage)} ${String(v?.policy)} running ${String(v?.running)}`
        : `${String(v?.verb)}${v?.policy !== undefined ? ` ${String(v.policy)}` : ''}${v?.swap !== undefined ? ` #${String(v.swap)}` : ''}${v?.stage !== undefined ? ` stage ${String(v.stage)}` : ''}`;
    return { subject, kind, detail: what.slice(0, 200), bytes: data.byteLength };
  } catch (err) {
    return { subject, kind: 'malformed', bytes: data.byteLength, error: (err as Error).message };
  }
}

export function formatTapLine(l: TapLine): string {
  const subject = printable(l.subject);
  if (l.error) return `${subject}  MALFORMED (${l.bytes} B): ${printable(l.error)}`;
  if (l.kind === 'trace') return `${subject}  trace batch: ${l.events} events (${l.bytes} B)`;
  const task = `${l.detail ? ` ${printable(l.detail)}` : ''}${l.task ? ` ${l.task}` : ''}`;
  const route = l.src !== undefined ? ` ${l.src}->${l.dst}` : '';
  const lat = l.latency_ms !== undefined ? ` latency ${l.latency_ms.toFixed(2)} ms` : '';
  return `${subject}  ${printable(l.kind)}${task}${l.iteration !== undefined ? ` it${l.iteration}` : ''}${route} ${l.bytes} B${lat}`;
}

const MAX_TIMEOUT_S = Math.floor((2 ** 31 - 1) / 1000);
/** How long the server may take to confirm the subscription before tap gives up. */
export const TAP_SUBSCRIBE_TIMEOUT_MS = 10_000;

export async function tapCommand(
  argv: readonly string[],
  out: (s: string) => void,
  err: (s: string) => void = (s) => process.stderr.write(`${s}\n`),
  subscribeTimeoutMs = TAP_SUBSCRIBE_TIMEOUT_MS,
): Promise<number> {
  const { flags } = parseFlags(argv, TAP_FLAGS, 'tap');
  if (printedHelp(flags, TAP_HELP, out)) return 0;
  if (!flags.job && !flags.all) throw new UsageError('tap: --job J is required (or --all for every job)');
  if (flags.job && flags.all) throw new UsageError('tap: --job J watches one job, --all every job; give one of them');
  const pattern = flags.all ? 'baton.>' : jobWildcard(checkJobName(String(flags.job)));
  const limit = flags.count as number;
  const seconds = flags.timeout as number;
  if (!Number.isSafeInteger(limit) || limit < 0)
    throw new UsageError(`tap: --count must be an integer >= 0, got ${limit}`);
  // Node's timers hold at most 2^31 - 1 ms; a longer one would fire at once.
  if (!(seconds >= 0 && seconds <= MAX_TIMEOUT_S))
    throw new UsageError(
      `tap: --timeout must be between 0 and ${MAX_TIMEOUT_S} seconds (0 = no limit), got ${seconds}`,
    );
  const url = natsUrlOf(flags.nats, 'tap') ?? TAP_COMMAND_DEFAULTS.nats;
  const access = natsAccessOf(flags, 'tap', url);
  const bus = await NatsBus.connect(url, {
    name: 'baton-tap',
    access: access.access,
    accessNames: access.names,
    onError: (e, subject) =>
      err(`tap: ${subject ? `${printable(subject)}: ` : ''}${printable(e instanceof Error ? e.message : String(e))}`),
  });
  let seen = 0;
  let stop: () => void = () => {};
  const stopped = new Promise<void>((resolve) => (stop = resolve));
  bus.subscribe(pattern, (subject, data) => {
    // Messages the client had already read when the limit was reached are not printed.
    if (limit > 0 && seen >= limit) return;
    const line = tapLine(subject, data);
    out(flags.json ? JSON.stringify(line) : formatTapLine(line));
    if (limit > 0 && ++seen >= limit) stop();
  });
  // A server that took the connection but never answers would otherwise hold tap here for good.
  let flushTimer: NodeJS.Timeout | undefined;
  const confirmMs = seconds > 0 ? Math.min(subscribeTimeoutMs, seconds * 1000) : subscribeTimeoutMs;
  const confirmed = await Promise.race([
    bus.flush().then(() => true),
    new Promise<false>((resolve) => (flushTimer = setTimeout(() => resolve(false), confirmMs))),
  ]).finally(() => clearTimeout(flushTimer));
  if (!confirmed) {
    void bus.close().catch(() => {});
    throw new NatsBusError(
      `the NATS server at ${bus.url} did not confirm the subscription within ${confirmMs / 1000} s`,
    );
  }
  err(`tap: watching ${pattern} on ${bus.url}`);
  void bus.disconnected().then((e) => {
    if (!bus.connection.isClosed())
      err(`tap: ${printable(e.message)}; reconnecting (messages sent meanwhile are not shown)`);
  });
  const timer = seconds > 0 ? setTimeout(stop, seconds * 1000) : null;
  process.once('SIGINT', stop);
  const lost = await Promise.race([stopped.then(() => null), bus.lost()]);
  if (timer) clearTimeout(timer);
  process.removeListener('SIGINT', stop);
  if (lost) throw new NatsBusError(`lost the connection to NATS at ${bus.url} (${lost.message})`);
  await bus.close();
  return 0;
}
