// The receiving side of a bus benchmark run in a child process (bus-receiver-child.ts), so
// the publisher's encoding and sealing and the receiver's decoding and opening run on two
// processes, as a job's sending and receiving stages do. The child's acks, one NATS message
// per message it counts, drive the publisher's in-flight window.

import { fork } from 'child_process';
import * as path from 'path';
import { randomBytes } from 'crypto';
import { connect } from '@nats-io/transport-node';
import type { ChildReply, ChildRequest } from './bus-receiver-child';
import type { Receiver, ReceiverSpec, ReceiverTally } from './bus-receiver';

/** How long the child may take to connect and subscribe, or to answer `finish`. */
const CHILD_MS = 30000;

export async function openRemoteReceiver(spec: ReceiverSpec): Promise<Receiver> {
  const ackSubject = `bench.ack.${randomBytes(6).toString('hex')}`;
  const acks = await connect({ servers: spec.url });
  let acked = 0;
  acks.subscribe(ackSubject, {
    callback: (e, m) => {
      if (!e) acked = Math.max(acked, Number(m.string()) || 0);
    },
  });
  await acks.flush();
  const child = fork(path.join(__dirname, 'bus-receiver-child.js'), [], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const replies: ChildReply[] = [];
  let waiting: (() => void) | undefined;
  let exited: string | undefined;
  child.on('message', (r: ChildReply) => {
    replies.push(r);
    waiting?.();
  });
  child.on('exit', (code, signal) => {
    exited = `the receiver process exited (${signal ?? code})`;
    waiting?.();
  });
  const next = (what: string) =>
    new Promise<ChildReply>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`the receiver process did not ${what} in ${CHILD_MS} ms`)),
        CHILD_MS,
      );
      const check = () => {
        const r = replies.shift();
        if (r === undefined && exited === undefined) return;
        clearTimeout(timer);
        waiting = undefined;
        if (r === undefined) reject(new Error(`${exited} before it would ${what}`));
        else if ('error' in r) reject(new Error(`receiver process: ${r.error}`));
        else resolve(r);
      };
      waiting = check;
      check();
    });
  const send = (m: ChildRequest) => child.send(m);
  const stop = async () => {
    if (exited === undefined) {
      // It closes its connections and disconnects after its tally; a stuck one is ended.
      const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      const timer = setTimeout(() => child.kill(), 2000);
      await gone;
      clearTimeout(timer);
    }
    await acks.close();
  };
  try {
    send({
      start: {
        url: spec.url,
        side: spec.side,
        bytes: spec.bytes,
        keyHex: spec.key && Buffer.from(spec.key).toString('hex'),
        ackSubject,
      },
    });
    await next('subscribe');
  } catch (e) {
    child.kill();
    await stop();
    throw e;
  }
  let final: ReceiverTally | undefined;
  return {
    received: () => acked,
    tally: () => {
      if (!final) throw new Error('the remote receiver is read after close()');
      return final;
    },
    close: async () => {
      try {
        send({ finish: true });
        const r = await next('report its tally');
        if ('tally' in r) final = r.tally;
      } finally {
        await stop();
      }
    },
  };
}
