// One stage process of the overhead bench's floor (bare-pipeline.ts): bf over ready
// buffers on raw nats.js, each task held for F or B ms with Baton's real-clock timer, and
// the 12-byte messages it and its coordinator exchange.

import { connect } from '@nats-io/transport-node';
import { RealClock, monotonicNow } from '../base/clock';

export const START = 0;
export const ACTIVATION = 1;
export const GRADIENT = 2;
export const REPORT = 3;
export const READY = 4;

interface Msg {
  kind: number;
  iteration: number;
  value: number;
}

export function message(kind: number, iteration: number, value: number): Uint8Array {
  const b = new Uint8Array(12);
  const v = new DataView(b.buffer);
  v.setUint32(0, kind);
  v.setUint32(4, iteration);
  v.setUint32(8, value);
  return b;
}

export function parse(data: Uint8Array): Msg | null {
  if (data.byteLength !== 12) return null;
  const v = new DataView(data.buffer, data.byteOffset, 12);
  return { kind: v.getUint32(0), iteration: v.getUint32(4), value: v.getUint32(8) };
}

export const stageSubject = (job: string, s: number) => `bare.${job}.${s}`;
export const reportSubject = (job: string) => `bare.${job}.report`;

export interface BareStage {
  P: number;
  M: number;
  F: number;
  B: number;
  stage: number;
  job: string;
  url: string;
}

/** A task a floor stage ran: iteration, kind, microbatch, start and end (monotonic ms). */
export interface BareTask {
  stage: number;
  iteration: number;
  kind: 'F' | 'B';
  mb: number;
  start: number;
  end: number;
}

/** Removes and returns the lowest microbatch of a ready list (Baton's canonical order). */
function takeLowest(ready: number[]): number | undefined {
  if (ready.length === 0) return undefined;
  let at = 0;
  for (let i = 1; i < ready.length; i++) if (ready[i] < ready[at]) at = i;
  return ready.splice(at, 1)[0];
}

/** One stage process: bf over ready buffers, the same timer as Baton's real clock. */
export async function runStage(o: BareStage): Promise<void> {
  const nc = await connect({ servers: o.url, name: `bare-${o.stage}` });
  const clock = new RealClock();
  const log: [number, 'F' | 'B', number, number, number][] = [];
  let iteration = -1;
  let readyF: number[] = [];
  let readyB: number[] = [];
  let early: Msg[] = [];
  let phase: 'B' | 'F' = 'B';
  let busy = false;
  let finished = 0;
  const pick = (): void => {
    if (busy) return;
    const order = phase === 'B' ? [readyB, readyF] : [readyF, readyB];
    for (const list of order) {
      const mb = takeLowest(list);
      if (mb !== undefined) return run(list === readyB ? 'B' : 'F', mb);
    }
  };
  const run = (kind: 'F' | 'B', mb: number): void => {
    busy = true;
    phase = kind === 'B' ? 'F' : 'B';
    const it = iteration;
    const start = monotonicNow();
    clock.setTimer(kind === 'F' ? o.F : o.B, () => {
      busy = false;
      log.push([it, kind, mb, start, monotonicNow()]);
      if (kind === 'F') {
        if (o.stage < o.P - 1) nc.publish(stageSubject(o.job, o.stage + 1), message(ACTIVATION, it, mb));
        else readyB.push(mb);
      } else if (o.stage > 0) nc.publish(stageSubject(o.job, o.stage - 1), message(GRADIENT, it, mb));
      if (++finished === 2 * o.M) nc.publish(reportSubject(o.job), message(REPORT, it, o.stage));
      pick();
    });
  };
  const take = (m: Msg): void => {
    if (m.kind === START) {
      iteration = m.iteration;
      finished = 0;
      phase = 'B';
      readyF = [];
      readyB = [];
      const held = early.filter((e) => e.iteration === iteration);
      early = early.filter((e) => e.iteration > iteration);
      for (const e of held) take(e);
    } else if (m.iteration !== iteration) {
      if (m.iteration > iteration) early.push(m);
      return;
    } else if (m.kind === ACTIVATION && m.value < o.M) readyF.push(m.value);
    else if (m.kind === GRADIENT && m.value < o.M) readyB.push(m.value);
    pick();
  };
  nc.subscribe(stageSubject(o.job, o.stage), {
    callback: (err, msg) => {
      if (err) return;
      const m = parse(msg.data);
      if (m) take(m);
    },
  });
  await nc.flush();
  nc.publish(reportSubject(o.job), message(READY, 0, o.stage));
  await nc.flush();
  // The parent ends this process by closing stdin; the task log goes out on stdout.
  process.stdin.resume();
  process.stdin.on('end', () => {
    process.stdout.write(JSON.stringify(log), () => void nc.close().then(() => process.exit(0)));
  });
}
