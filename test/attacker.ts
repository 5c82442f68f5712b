// A stranger on the job's NATS server, without its key: it watches the traffic (the
// payloads travel in the clear) and forges what it can build from it. Each forgery is
// counted in `sent` by attack; the job under attack must refuse and count every one.

import { NatsBus } from '../transport/nats-bus';
import { decodeEnvelope, decodeValue, encodeEnvelope, encodeValue } from '../transport/codec';
import type { Envelope } from '../transport/envelope';

export type Attack = 'activations' | 'reports' | 'control' | 'stranger-module' | 'trace';

export interface Attacker {
  readonly sent: Record<Attack, number>;
  stop(): Promise<void>;
}

function zeroed(e: Envelope): Envelope {
  return {
    ...e,
    tensors: e.tensors.map((t) => ({ ...t, data: new Float32Array(t.data.length) })),
  };
}

/** Start forging against `job` on the server at `url`: `module` is the stranger's policy module for host requests. */
export async function attack(url: string, job: string, attacks: readonly Attack[], module: string): Promise<Attacker> {
  const bus = await NatsBus.connect(url, { name: 'stranger' });
  const sent: Record<Attack, number> = { activations: 0, reports: 0, control: 0, 'stranger-module': 0, trace: 0 };
  const on = new Set(attacks);
  const send = (what: Attack, subject: string, data: Uint8Array) => {
    bus.publish(subject, data);
    sent[what]++;
  };
  let activation: Envelope | null = null;
  const reports = new Map<number, Envelope>();
  bus.subscribe(`baton.${job}.>`, (subj, d) => {
    try {
      if (subj.includes('.trace.')) return;
      const e = decodeEnvelope(d);
      if (e.kind === 'activation' && activation === null) activation = e;
      if (e.kind === 'report' && !reports.has(e.src)) reports.set(e.src, e);
      // A new iteration: forged inputs for every microbatch before the genuine ones, and
      // forged reports of every stage (the final and checkpoint iterations among them).
      if (e.kind === 'control' && e.dst === 1) {
        if (on.has('activations') && activation !== null)
          for (let mb = 0; mb < 8; mb++)
            send(
              'activations',
              `baton.${job}.activation.1`,
              encodeEnvelope({ ...zeroed(activation), iteration: e.iteration, mb, launch: e.launch }),
            );
        if (on.has('reports'))
          for (const r of reports.values())
            send(
              'reports',
              `baton.${job}.report`,
              encodeEnvelope({
                ...r,
                iteration: e.iteration,
                seq: r.seq + 1000,
                launch: e.launch,
                body: { ...r.body, loss: 123.456 },
              }),
            );
        if (on.has('trace'))
          send(
            'trace',
            `baton.${job}.trace.0`,
            encodeValue({
              launch: e.launch,
              events: [{ type: 'iteration-start', t: 0, stage: 0, iteration: e.iteration }],
            }),
          );
      }
    } catch {
      /* not an envelope */
    }
  });
  const seenNodes = new Set<string>();
  // Host requests: to standalone agents on the shared subjects, to agents started for the job on its own.
  const onRequest = (subj: string, d: Uint8Array) => {
    try {
      const req = decodeValue(d) as Record<string, unknown>;
      if (req.verb !== 'host' || seenNodes.has(subj)) return;
      seenNodes.add(subj);
      const { launch, reply } = req;
      // After the genuine host request: abort and exit with the launch id read off the traffic, and a host of the stranger's module.
      setTimeout(() => {
        if (on.has('control')) {
          send('control', subj, encodeValue({ verb: 'abort', job, launch, reply }));
          send('control', subj, encodeValue({ verb: 'exit' }));
          send('control', subj, encodeValue({ verb: 'finish', job, launch, reply }));
        }
        if (on.has('stranger-module'))
          send(
            'stranger-module',
            subj,
            encodeValue({
              ...req,
              config: { ...(req.config as object), job: `${job}x`, policy: module },
              launch: 'stranger',
            }),
          );
      }, 50);
    } catch {
      /* not a request */
    }
  };
  bus.subscribe('baton._nodes.>', onRequest);
  bus.subscribe(`baton.${job}.node.*`, onRequest);
  await bus.flush();
  return { sent, stop: () => bus.close() };
}
