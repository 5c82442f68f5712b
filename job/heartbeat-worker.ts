// The heartbeat thread of a node agent's process (started by job/heartbeat.ts): its own NATS
// connection and its own event loop, so it keeps beating while a compute task holds the
// main thread; it stops with the process (a SIGSTOP stops it too, which is the point).
// Its beats are sealed under the agent's key as node:<name>, like the agent's own messages.

import { parentPort, workerData } from 'worker_threads';
import { NatsBus } from '../transport/nats-bus';
import { AuthBus } from '../transport/auth-bus';
import { encodeValue } from '../transport/codec';
import { readActivity } from '../base/task-activity';
import type { NatsAccess } from '../transport/nats-access';

interface BeatData {
  url: string;
  access: NatsAccess;
  key: Uint8Array;
  subject: string;
  name: string;
  pid: number;
  everyMs: number;
  activity: SharedArrayBuffer;
}

async function beat(d: BeatData): Promise<void> {
  const nats = await NatsBus.connect(d.url, { name: `baton-beat-${d.name}`, access: d.access });
  const bus = new AuthBus(nats, d.key, `node:${d.name}`);
  let seq = 0;
  const send = () => {
    const a = readActivity(d.activity);
    bus.publish(d.subject, encodeValue({ verb: 'beat', name: d.name, pid: d.pid, seq: seq++, ...a }));
  };
  send();
  const t = setInterval(send, d.everyMs);
  parentPort?.once('message', () => {
    clearInterval(t);
    void bus.close().finally(() => process.exit(0));
  });
}

beat(workerData as BeatData).catch((e: unknown) => {
  parentPort?.postMessage({ error: e instanceof Error ? e.message : String(e) });
});
