// The receiving side of a bus benchmark run in a child process (bus-receiver-child.ts), so
// the publisher's encoding and sealing and the receiver's decoding and opening run on two
// processes, as a job's sending and receiving stages do. The child's acks, one NATS message
// per message it counts, drive the publisher's in-flight window.

import { ChildProcess, fork } from 'child_process';
import * as path from 'path';
import { randomBytes } from 'crypto';
import { connect } from '@nats-io/transport-node';
import type { ChildReply, ChildRequest } from './bus-receiver-child';
import type { Receiver, ReceiverSpec, ReceiverTally } from './bus-receiver';
import { onProcessEnd } from '../transport/process-cleanup';

/** How long the child may take to connect and subscribe, or to answer `finish`. */
const CHILD_MS = 30000;

/** The receiver child and its IPC conversation: requests out, replies taken in order. */
class ReceiverChild {
  private readonly child: ChildProcess;
  private readonly replies: ChildReply[] = [];
  private waiting: (() => void) | undefined;
  private exited: string | undefined;
  /** Kills the child if this process ends first (a signal, an exit): no receiver outlives its bench. */
  private readonly unlinkCleanup: () => void;

  constructor() {
    this.child = fork(path.join(__dirname, 'bus-receiver-child.js'), [], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.unlinkCleanup = onProcessEnd(() => this.child.kill('SIGKILL'));
    // A failed fork or a send to a child that is gone: told like its exit, not thrown.
    this.child.on('error', (e) => {
      this.exited ??= `the receiver process failed (${e.message})`;
      this.waiting?.();
    });
    this.child.on('message', (r: ChildReply) => {
      this.replies.push(r);
      this.waiting?.();
    });
    this.child.on('exit', (code, signal) => {
      this.exited = `the receiver process exited (${signal ?? code})`;
      this.waiting?.();
    });
  }

  send(m: ChildRequest): void {
    if (this.exited === undefined && this.child.connected)
      this.child.send(m, (e) => {
        if (e) {
          this.exited ??= `the receiver process could not be sent a request (${e.message})`;
          this.waiting?.();
        }
      });
  }

  /** The next reply; rejects on an error reply, the child's exit, or after CHILD_MS. */
  next(what: string): Promise<ChildReply> {
    return new Promise<ChildReply>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`the receiver process did not ${what} in ${CHILD_MS} ms`)),
        CHILD_MS,
      );
      const check = () => {
        const r = this.replies.shift();
        if (r === undefined && this.exited === undefined) return;
        clearTimeout(timer);
        this.waiting = undefined;
        if (r === undefined) reject(new Error(`${this.exited} before it would ${what}`));
        else if ('error' in r) reject(new Error(`receiver process: ${r.error}`));
        else resolve(r);
      };
      this.waiting = check;
      check();
    });
  }

  /** Waits for the child to end (it does after its tally), killing it when it does not within 2 s or `now`. */
  async end(now = false): Promise<void> {
    this.unlinkCleanup();
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const gone = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    if (now) this.child.kill();
    const timer = setTimeout(() => this.child.kill(), 2000);
    await gone;
    clearTimeout(timer);
  }
}

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
  const child = new ReceiverChild();
  const keyHex = spec.key && Buffer.from(spec.key).toString('hex');
  try {
    child.send({ start: { url: spec.url, side: spec.side, bytes: spec.bytes, keyHex, ackSubject } });
    await child.next('subscribe');
  } catch (e) {
    await child.end(true);
    await acks.close();
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
        child.send({ finish: true });
        const r = await child.next('report its tally');
        if ('tally' in r) final = r.tally;
      } finally {
        await child.end();
        await acks.close();
      }
    },
  };
}
