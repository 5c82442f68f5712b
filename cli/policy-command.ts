// `baton policy set` and `baton policy get`: swap a running job's policy, and see the
// policies in force, by talking to the job's policy actor over NATS (cli/policy-client.ts).

import { SWAP_DEFAULTS } from '../job/defaults';
import { InputError } from '../base/errors';
import { checkJobName } from '../transport/subjects';
import { NatsBus } from '../transport/nats-bus';
import { AuthBus } from '../transport/auth-bus';
import { Bus } from '../transport/bus';
import { TOOL_LABEL_PREFIX } from '../actors/policy-messages';
import { readKeyFile } from './key-file';
import { FlagSpec, HELP_FLAG, ParsedFlags, UsageError, parseFlags, printedHelp } from './args';
import { RUNNING_JOB_FLAGS, ResolvedAccess, natsAccessOf, natsFlag } from './nats-flag';
import { formatTable } from './table';
import { requestSwap, requestView } from './policy-client';

/** The job's policy actor refused the swap; the job goes on with the policy it had. */
export class SwapRefusedByJobError extends InputError {
  override name = 'SwapRefusedByJobError';
}

const COMMON: readonly FlagSpec[] = [
  HELP_FLAG,
  ...RUNNING_JOB_FLAGS,
  {
    name: 'wait-ms',
    type: 'int',
    metavar: 'MS',
    help: 'how long to wait for the answer (set: for every stage to adopt the swap)',
    default: SWAP_DEFAULTS.policyWaitMs,
  },
  {
    name: 'key-file',
    type: 'string',
    metavar: 'FILE',
    help: "the job's key file (run/train --key-file FILE): requests and answers are sealed under it",
  },
  { name: 'json', type: 'bool', help: 'print the answer as JSON' },
];

const SET_FLAGS: readonly FlagSpec[] = [
  ...COMMON,
  {
    name: 'policy',
    type: 'string',
    metavar: 'NAME|MODULE',
    help: 'the new arbitration policy: a name sim --help lists, or a module path the job was started with (--swap-modules)',
  },
  {
    name: 'consistency',
    type: 'string',
    metavar: 'NAME',
    help: "an asynchronous job's new consistency policy (train --help lists them); with --policy, two swaps",
  },
];
const GET_FLAGS = COMMON;

function help(verb: string, flags: readonly FlagSpec[], what: string): string {
  const rows = flags.map((f) => {
    const name = `--${f.name}${f.type === 'bool' ? '' : ` ${f.metavar ?? 'X'}`}`;
    return `  ${name.padEnd(26)} ${f.help}${f.default !== undefined ? ` (default ${f.default})` : ''}`;
  });
  return `Usage: baton policy ${verb} --job J [options]\n\n${what}\n\nOptions:\n${rows.join('\n')}\n`;
}

export const POLICY_SET_HELP = help(
  'set',
  SET_FLAGS,
  `Swap a running job's arbitration policy. The job's policy actor checks it (a known name or an allowed
module that can run the job's shape) and sends it to every stage; a hint order takes effect at each
stage's next arbitration, a change into or out of a binding schedule at the next iteration boundary.
Prints the swap and its latency (request -> last stage adopted). A refused swap exits 2 and the job
keeps its policy.`,
);
export const POLICY_GET_HELP = help(
  'get',
  GET_FLAGS,
  "Print a running job's arbitration policy, when it took effect, the swaps so far and those not yet adopted.",
);

interface Common {
  job: string;
  url: string;
  access: ResolvedAccess;
  waitMs: number;
  key: Uint8Array;
}

function common(flags: Record<string, unknown>, verb: string): Common {
  if (!flags.job) throw new UsageError(`policy ${verb}: --job J is required`);
  if (flags.keyFile === undefined)
    throw new UsageError(
      `policy ${verb}: --key-file FILE is required: a job over NATS takes only messages sealed under its key (start it with run/train --key-file FILE)`,
    );
  const waitMs = flags.waitMs as number;
  if (!Number.isSafeInteger(waitMs) || waitMs < 1 || waitMs > 600_000)
    throw new UsageError(`policy ${verb}: --wait-ms must be an integer from 1 to 600000, got ${waitMs}`);
  const key = readKeyFile(String(flags.keyFile), `policy ${verb}: --key-file`);
  const url = natsFlag(flags.nats, `policy ${verb}`);
  const access = natsAccessOf(flags as ParsedFlags, `policy ${verb}`, url);
  return { job: checkJobName(String(flags.job)), url, access, waitMs, key };
}

async function withBus<T>(c: Common, f: (bus: Bus) => Promise<T>): Promise<T> {
  const { url, key, access } = c;
  const bus = await NatsBus.connect(url, {
    name: 'baton-policy',
    reconnect: false,
    access: access.access,
    accessNames: access.names,
  });
  try {
    return await f(new AuthBus(bus, key, `${TOOL_LABEL_PREFIX}policy`));
  } finally {
    await bus.close();
  }
}

async function setPolicy(c: Common, flags: ParsedFlags, out: (s: string) => void): Promise<number> {
  if (!flags.policy && !flags.consistency)
    throw new UsageError('policy set: --policy NAME|MODULE or --consistency NAME is required');
  const asks: [string, 'arbitration' | 'consistency'][] = [];
  if (flags.policy) asks.push([String(flags.policy), 'arbitration']);
  if (flags.consistency) asks.push([String(flags.consistency), 'consistency']);
  for (const [policy, what] of asks) await setOne(out, { ...c, json: flags.json === true }, policy, what);
  return 0;
}

async function setOne(
  out: (s: string) => void,
  o: Common & { json: boolean },
  policy: string,
  what: 'arbitration' | 'consistency',
): Promise<void> {
  const { job, waitMs } = o;
  const by = `baton policy set (pid ${process.pid})`;
  const r = await withBus(o, (bus) => requestSwap(bus, job, policy, { by, waitMs, what }));
  if (o.json) out(JSON.stringify({ ...r.answer, what, adopted: r.adopted, round_trip_ms: r.roundTripMs }));
  if (r.answer.ok !== true)
    throw new SwapRefusedByJobError(
      `job ${job} refused the swap to ${policy}: ${String(r.answer.error)}; it keeps its ${what} policy`,
    );
  if (o.json) return;
  const at = r.answer.atIteration !== undefined ? ` from iteration ${r.answer.atIteration}` : '';
  out(`job ${job}: swap ${r.answer.swap} (${what}): ${r.answer.from} -> ${r.answer.to}${at}`);
  out(
    r.adopted
      ? `adopted by every stage: latency ${Number(r.adopted.latencyMs).toFixed(1)} ms (request -> last stage's ack, at the job's policy actor)`
      : `not yet adopted by every stage after ${waitMs} ms (a binding change waits for the next iteration boundary): see baton policy get`,
  );
}

async function getPolicy(c: Common, flags: ParsedFlags, out: (s: string) => void): Promise<number> {
  const { job, waitMs } = c;
  const v = await withBus(c, (bus) => requestView(bus, job, waitMs));
  if (flags.json) {
    out(JSON.stringify(v));
    return 0;
  }
  const since = v.swap === null ? 'job start' : `swap ${v.swap}, iteration ${v.sinceIteration}`;
  out(
    formatTable(
      ['what', 'policy', 'in force since', 'swaps', 'refused', 'pending'],
      [
        [
          'arbitration',
          String(v.policy),
          since,
          String(v.swaps),
          String(v.refused),
          (v.pending as string[]).join('; ') || '-',
        ],
        ...consistencyRow(v.consistency as { policy: string; swap: number | null } | null),
      ],
      `job ${job}`,
    ),
  );
  return 0;
}

function consistencyRow(c: { policy: string; swap: number | null } | null): string[][] {
  return c ? [['consistency', c.policy, c.swap === null ? 'job start' : `swap ${c.swap}`, '', '', '']] : [];
}

const VERBS = {
  set: { specs: SET_FLAGS, help: POLICY_SET_HELP, run: setPolicy },
  get: { specs: GET_FLAGS, help: POLICY_GET_HELP, run: getPolicy },
};

/** `policy set` or `policy get`: --help prints its help, else it runs with the flags common() checks. */
async function verbCommand(
  verb: keyof typeof VERBS,
  argv: readonly string[],
  out: (s: string) => void,
): Promise<number> {
  const { specs, help, run } = VERBS[verb];
  const { flags } = parseFlags(argv, specs, `policy ${verb}`);
  if (printedHelp(flags, help, out)) return 0;
  return run(common(flags, verb), flags, out);
}

export async function policyCommand(argv: readonly string[], out: (s: string) => void): Promise<number> {
  const [verb, ...rest] = argv;
  if (verb === 'set' || verb === 'get') return verbCommand(verb, rest, out);
  if (verb === '--help' || verb === '-h' || verb === undefined) {
    out(`${POLICY_SET_HELP}\n${POLICY_GET_HELP}`);
    return verb === undefined ? 2 : 0;
  }
  throw new UsageError(`policy: unknown subcommand ${JSON.stringify(verb)}; use set or get`);
}
