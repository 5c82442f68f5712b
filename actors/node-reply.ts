// How a node agent answers on the reply subject a request names: a subject a peer got
// wrong is refused (logged, never thrown), and an answer too big for the server is followed
// by a small error, so the asker knows the node lives.

import { quoteValue } from '../base/quote';
import { Bus } from '../transport/bus';
import { encodeValue } from '../transport/codec';
import { PayloadTooLargeError } from '../transport/nats-bus';
import { isReplyPrefix, isReplySubject } from './node-protocol';

/** Publishes `msg` from node `name` on `to`; what cannot be answered is told to `refused`. */
export function answerOn(
  bus: Bus,
  name: string,
  to: unknown,
  msg: Record<string, unknown>,
  refused: (line: string) => void,
): void {
  if (typeof to !== 'string' || !isReplyPrefix(to)) return;
  if (!isReplySubject(to)) {
    refused(`node ${name}: cannot answer on ${quoteValue(to)}: not a valid subject`);
    return;
  }
  try {
    bus.publish(to, encodeValue({ ...msg, name }));
  } catch (err) {
    refused(`node ${name}: cannot answer on ${quoteValue(to)}: ${(err as Error).message}`);
    if (err instanceof PayloadTooLargeError)
      try {
        bus.publish(
          to,
          encodeValue({
            verb: 'error',
            name,
            message: `the ${quoteValue(msg.verb)} answer is ${err.size} bytes, over the server's max_payload of ${err.limit}`,
          }),
        );
      } catch {
        /* refused above */
      }
  }
}
