// `baton auth init DIR`: the NATS users of one job for a server an operator runs. It writes
// DIR/nats-accounts.conf, an `accounts {}` block to include in the server's config (users
// inside accounts, never a bare authorization block: GHSA-fr2g-9hjm-wr23), and one
// credentials file per process, DIR/<user>.env, holding BATON_NATS_URL with that user's
// password (each mode 600, created, never overwritten). The launcher may use everything
// of the job (baton.<job>.>) and reach the listed standalone agents; each agent only what
// the stages it will host use (job/nats-users.ts), which depends on the job's stages and
// chunks: with --chunks V > 1 the last stage sends stage 0 activations, and stage 0 sends
// it gradients.

import { mkdirSync, openSync, closeSync, writeSync } from 'fs';
import * as path from 'path';
import { FlagSpec, HELP_FLAG, UsageError, helpText, parseFlags } from './args';
import { checkJobName } from '../transport/subjects';
import { MAX_NODE_NAME, NODE_NAME_RE } from '../actors/node-agent';
import { NatsUser, sharedServerUsers } from '../job/nats-users';
import { accountsBlock } from '../transport/nats-server-config';
import { NATS_URL_ENV, natsFlag } from './nats-flag';
import { urlWithUser } from './own-server';
import { quoteValue } from '../base/quote';
import { AUTH_INIT_DEFAULTS } from '../job/defaults';
import { SHAPE_LIMITS } from '../policies/task';

export const AUTH_INIT_FLAGS: readonly FlagSpec[] = [
  { name: 'job', type: 'string', metavar: 'NAME', help: 'the job the users are for (required)' },
  {
    name: 'nodes',
    type: 'list',
    metavar: 'N1,…',
    help: 'the standalone node agents (baton node --name) of the job, in the order baton run --nodes will name them: each gets a user for the stages it will host (required)',
  },
  { name: 'stages', type: 'int', metavar: 'P', help: 'the number of pipeline stages of the job (required)' },
  {
    name: 'chunks',
    type: 'int',
    metavar: 'V',
    default: AUTH_INIT_DEFAULTS.chunks,
    help: "the job's model chunks per stage (run/train --chunks V; the users follow the runtime's routing over P stages × V chunks): with V > 1 the last stage's user may also send stage 0 activations and stage 0's the last stage gradients. A chunked job run with users made for V = 1 fails at once, naming the subject the server refused",
  },
  {
    name: 'server',
    type: 'string',
    metavar: 'URL',
    default: AUTH_INIT_DEFAULTS.server,
    help: 'the URL the processes will reach the server on (written into the credential files)',
  },
  { name: 'json', type: 'bool', help: 'print what was written as one JSON object' },
  HELP_FLAG,
];

/** A file of `text` created with mode 600; an existing one is not overwritten. */
function writeSecret(file: string, text: string): void {
  let fd: number;
  try {
    fd = openSync(file, 'wx', 0o600);
  } catch (err) {
    throw new UsageError(`auth init: cannot create ${JSON.stringify(file)}: ${(err as Error).message}`);
  }
  try {
    writeSync(fd, text);
  } finally {
    closeSync(fd);
  }
}

function checkedFlags(flags: Record<string, unknown>): {
  job: string;
  nodes: string[];
  stages: number;
  chunks: number;
  server: string;
} {
  if (flags.job === undefined) throw new UsageError('auth init: --job NAME is required');
  const job = checkJobName(String(flags.job));
  const nodes = (flags.nodes as string[] | undefined) ?? [];
  if (nodes.length === 0) throw new UsageError('auth init: --nodes N1,… is required');
  for (const n of nodes)
    if (!NODE_NAME_RE.test(n) || n.length > MAX_NODE_NAME)
      throw new UsageError(`auth init: --nodes: ${quoteValue(n)} is not a node name (as baton node --name)`);
  if (new Set(nodes).size !== nodes.length) throw new UsageError('auth init: --nodes: a node is named twice');
  const stages = flags.stages as number | undefined;
  if (stages === undefined || stages < 1) throw new UsageError('auth init: --stages P (at least 1) is required');
  if (nodes.length > stages)
    throw new UsageError(
      `auth init: --nodes names ${nodes.length} agents for ${stages} stages; a job uses at most one per stage`,
    );
  const chunks = flags.chunks as number;
  if (!(chunks >= 1 && chunks <= SHAPE_LIMITS.chunks))
    throw new UsageError(`auth init: --chunks V must be from 1 to ${SHAPE_LIMITS.chunks}, got ${quoteValue(chunks)}`);
  const server = natsFlag(flags.server, 'auth init', '--server');
  if (server.includes('@') || server.includes(','))
    throw new UsageError('auth init: --server is one nats://host:port, without credentials');
  return { job, nodes, stages, chunks, server: server.startsWith('nats://') ? server : `nats://${server}` };
}

/** Writes the config snippet and the credential files; returns the lines (or JSON) to print. */
export function authInit(argv: readonly string[]): string {
  const { flags, positional } = parseFlags(argv, AUTH_INIT_FLAGS, 'auth init', 1);
  if (flags.help) return AUTH_INIT_HELP;
  const dir = positional[0];
  if (dir === undefined) throw new UsageError(`auth init: usage: ${AUTH_INIT_USAGE}`);
  const o = checkedFlags(flags);
  const { launcher, nodes } = sharedServerUsers(o.job, o.nodes, { stages: o.stages, chunks: o.chunks });
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const config = path.join(dir, 'nats-accounts.conf');
  const header = `# baton auth init: the NATS users of job ${o.job} (include this file in the server's config)\n`;
  writeSecret(config, header + accountsBlock([launcher, ...nodes]).join('\n') + '\n');
  const files: Record<string, string> = {};
  for (const u of [launcher, ...nodes] as NatsUser[]) {
    const file = path.join(dir, `${u.user}.env`);
    writeSecret(file, `${NATS_URL_ENV}=${urlWithUser(o.server, u)}\n`);
    files[u.user] = file;
  }
  if (flags.json) return JSON.stringify({ job: o.job, config, credentials: files });
  return [
    `wrote ${config} (mode 600): include it in the nats-server config of ${o.server}`,
    ...Object.entries(files).map(([user, file]) => `wrote ${file} (mode 600): the credentials of user ${user}`),
  ].join('\n');
}

export const AUTH_INIT_USAGE =
  'baton auth init DIR --job NAME --nodes N1,… --stages P [--chunks V] [--server URL] [--json]';
export const AUTH_INIT_HELP = helpText(
  'auth init',
  "write a shared nats-server's accounts for one job and a credentials file per process",
  AUTH_INIT_USAGE,
  AUTH_INIT_FLAGS,
);
