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
