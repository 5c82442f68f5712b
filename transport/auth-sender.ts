// Who may send what: a Bus over an AuthBus that also refuses a message whose seal is valid
// but whose sender (the seal's label) is not one the subject may come from, counted as
// `forged-sender` on the AuthBus. All of a job's processes hold its key, so this catches a
// process speaking for another (a trace batch of stage 2 from the agent hosting stage 0),
// not a stranger: strangers' messages fail the seal itself. Over another bus it is that bus.

import type { Bus, BusHandler, Subscription } from './bus';
import { AuthBus } from './auth-bus';

/** Why `sender` may not send on `subject`, or null when it may. */
export type SenderRule = (subject: string, sender: string) => string | null;

export function senderChecked(bus: Bus, rule: SenderRule): Bus {
  if (!(bus instanceof AuthBus)) return bus;
  return {
    kind: bus.kind,
    get maxMessageBytes() {
      return bus.maxMessageBytes;
    },
    publish: (subject, data) => bus.publish(subject, data),
    subscribe: (subject: string, handler: BusHandler): Subscription =>
      bus.subscribe(subject, (subj, data, meta) => {
        const problem = meta?.sender === undefined ? 'no sender' : rule(subj, meta.sender);
        if (problem !== null) bus.refuse('forged-sender', subj, problem);
        else handler(subj, data, meta);
      }),
    flush: () => bus.flush(),
    written: () => bus.written(),
    close: () => bus.close(),
  };
}
