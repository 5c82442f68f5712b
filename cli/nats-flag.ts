import { natsUrlProblem } from '../transport/nats-url';
import { UsageError } from './args';

/** How every command's --nats help spells the value (transport/nats-url.ts parses it). */
export const NATS_URL_FORMS =
  'host:port or nats://[user:password@|token@]host:port, comma-separated for several servers';

/** Where `baton run` hands its stage processes the server URL: not on their command lines, which `ps` shows to every user. */
export const NATS_URL_ENV = 'BATON_NATS_URL';

/** The --nats value of `command` (or what `source` names), refused as a usage error when it does not parse. */
export function natsFlag(value: unknown, command: string, source = '--nats'): string {
  const raw = String(value);
  const problem = natsUrlProblem(raw);
  if (problem) throw new UsageError(`${command}: ${source} ${problem}`);
  return raw;
}

/** The environment variables a NATS URL is read from when no --nats is given, first found first. */
export const NATS_URL_ENVS = [NATS_URL_ENV, 'NATS_URL'] as const;

/** The server of `--nats`, else of BATON_NATS_URL, else of NATS_URL (the environment keeps a password off the command line); undefined when none is set. */
export function natsUrlOf(flag: unknown, command: string): string | undefined {
  if (flag !== undefined) return natsFlag(flag, command);
  for (const name of NATS_URL_ENVS) {
    const v = process.env[name];
    if (v !== undefined && v !== '') return natsFlag(v, command, name);
  }
  return undefined;
}
