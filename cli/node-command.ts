// `baton node`: a node agent process that hosts stage actors on request.

import { NODE_NAME_RE, NodeAgent } from '../actors/node';
import { NatsBus, NatsBusError } from '../transport/nats-bus';
import { FlagSpec, UsageError, helpText, parseFlags } from './args';

const NODE_FLAGS: readonly FlagSpec[] = [
  { name: 'nats', type: 'string', metavar: 'URL', help: 'NATS server to join (required), e.g. nats://127.0.0.1:4222' },
  { name: 'name', type: 'string', metavar: 'NAME', help: 'node name, unique among the nodes of a NATS system', default: `node-${process.pid}` },
  { name: 'quiet', type: 'bool', help: 'do not log hosting events' },
  { name: 'json', type: 'bool', help: 'print one JSON line when ready ({node, pid, nats}) and log as JSON lines' },
  { name: 'exit-with-stdin', type: 'bool', help: 'exit when stdin closes (baton run starts its stage processes so: they end with it, even if it is killed)' },
  { name: 'help', type: 'bool', help: 'show this help' },
];

export const NODE_HELP = helpText('node', 'start a node agent that hosts stage actors for jobs over NATS',
  'baton node --nats URL [--name NAME]', NODE_FLAGS);

export async function nodeCommand(argv: readonly string[], out: (s: string) => void): Promise<number> {
  const { flags } = parseFlags(argv, NODE_FLAGS, 'node');
  if (flags.help) {
    out(NODE_HELP);
    return 0;
  }
  if (!flags.nats) throw new UsageError('node: --nats URL is required');
  const name = String(flags.name);
  if (!NODE_NAME_RE.test(name)) throw new UsageError(`node: --name must match [A-Za-z0-9_-]+, got ${JSON.stringify(name)}`);
  const bus = await NatsBus.connect(String(flags.nats), { name: `baton-node-${name}` });
  const log = flags.quiet ? () => {} : flags.json
    ? (l: string) => process.stderr.write(`${JSON.stringify({ node: name, log: l })}\n`)
    : (l: string) => process.stderr.write(`${l}\n`);
  const agent = new NodeAgent({ name, bus, log });
  agent.start();
  if (flags.json) out(JSON.stringify({ node: name, pid: process.pid, nats: flags.nats, ready: true }));
  else log(`node ${name}: ready on ${flags.nats} (pid ${process.pid})`);
  const stop = () => void bus.close().finally(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  if (flags.exitWithStdin) {
    // The launcher holds the other end of stdin; it closes when the launcher ends, however it ends.
    process.stdin.once('close', stop);
    process.stdin.once('end', stop);
    process.stdin.on('error', stop);
    process.stdin.resume();
  }
  const lost = await Promise.race([agent.exited.then(() => null), bus.lost()]);
  if (lost) throw new NatsBusError(`node ${name}: lost the connection to NATS at ${flags.nats} (${lost.message}); the jobs it hosted are gone`);
  await bus.close();
  return 0;
}
