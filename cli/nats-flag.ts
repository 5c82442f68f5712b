import { natsUrlProblem } from '../transport/nats-url';
import { UsageError } from './args';

/** The --nats value of `command` (or what `source` names), refused as a usage error when it does not parse. */
export function natsFlag(value: unknown, command: string, source = '--nats'): string {
  const raw = String(value);
  const problem = natsUrlProblem(raw);
  if (problem) throw new UsageError(`${command}: ${source} ${problem}`);
  return raw;
}
