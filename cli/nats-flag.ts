import { natsUrlProblem } from '../transport/nats-url';
import { UsageError } from './args';

/** The --nats value of `command`, refused as a usage error when it does not parse. */
export function natsFlag(value: unknown, command: string): string {
  const raw = String(value);
  const problem = natsUrlProblem(raw);
  if (problem) throw new UsageError(`${command}: --nats ${problem}`);
  return raw;
}
