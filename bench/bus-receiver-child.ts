// A bus benchmark receiver in a process of its own (bus-remote-receiver.ts starts it): it
// takes its spec over the IPC channel, acknowledges every message it counts by a small NATS
// message on the ack subject (the publisher's in-flight window), and answers `finish` with
// its tally. Nothing is timed here; the publisher times the run up to the last ack.

import { connect } from '@nats-io/transport-node';
import { openReceiver } from './bus-receiver';
import type { BusSide, Receiver } from './bus-receiver';

export interface ChildStart {
  url: string;
  side: BusSide;
  bytes: number;
  /** The job key of a sealed run, hex. */
  keyHex?: string;
  ackSubject: string;
}

export type ChildRequest = { start: ChildStart } | { finish: true };
export type ChildReply = { ready: true } | { tally: ReturnType<Receiver['tally']> } | { error: string };

const reply = (r: ChildReply) => process.send?.(r);

async function start(s: ChildStart): Promise<Receiver> {
  const acks = await connect({ servers: s.url });
  const receiver = await openReceiver({
    url: s.url,
    side: s.side,
    bytes: s.bytes,
    key: s.keyHex ? Buffer.from(s.keyHex, 'hex') : undefined,
    onMessage: (got) => acks.publish(s.ackSubject, String(got)),
  });
  const close = receiver.close;
  receiver.close = async () => {
    await Promise.all([close(), acks.drain()]);
  };
  return receiver;
}

if (require.main === module) {
  let finishing = false;
  // The benchmark is gone (killed, crashed) before it asked for the tally: so is its receiver.
  process.on('disconnect', () => process.exit(finishing ? 0 : 1));
  let receiver: Receiver | undefined;
  process.on('message', (m: ChildRequest) => {
    if ('start' in m)
      start(m.start).then(
        (r) => {
          receiver = r;
          reply({ ready: true });
        },
        (e: Error) => reply({ error: e.message }),
      );
    else if (receiver) {
      finishing = true;
      const r = receiver;
      reply({ tally: r.tally() });
      r.close().finally(() => process.disconnect());
    } else {
      finishing = true;
      process.disconnect();
    }
  });
}
