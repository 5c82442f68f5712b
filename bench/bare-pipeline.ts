// The floor of the overhead bench: the same pipeline with no Baton code in it. P stage
// processes on raw nats.js (no actors, codec, sender/receiver mailboxes, events or trace
// stream; each message is 12 raw bytes), each holding its stage for F or B with the same
// real-clock timer as Baton's emulated compute and picking the moment it is free a ready
// B before a ready F (bf, unbounded buffers). A coordinator in this process starts each
// iteration (a start message to every stage; stage 0 then has all M forwards ready) and
// ends it when every stage has reported, as Baton's does. What Baton adds over this is
// its own overhead; what this takes over (M+P−1)(F+B) is the machine's.

import { spawn, ChildProcess } from 'child_process';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { RealClock, monotonicNow } from '../actors/clock';
import { startNatsServer } from '../transport/nats-server';

/** The child-process flag of one floor measurement: `--floor P M F B` prints its JSON. */
export const FLOOR_FLAG = '--floor';
const STAGE_FLAG = '--stage';

const START = 0;
const ACTIVATION = 1;
const GRADIENT = 2;
const REPORT = 3;
const READY = 4;

function message(kind: number, iteration: number, value: number): Uint8Array {
  const b = new Uint8Array(12);
  const v = new DataView(b.buffer);
  v.setUint32(0, kind);
  v.setUint32(4, iteration);
  v.setUint32(8, value);
  return b;
}

function parse(data: Uint8Array): { kind: number; iteration: number; value: number } | null {
  if (data.byteLength !== 12) return null;
  const v = new DataView(data.buffer, data.byteOffset, 12);
  return { kind: v.getUint32(0), iteration: v.getUint32(4), value: v.getUint32(8) };
}

const stageSubject = (job: string, s: number) => `bare.${job}.${s}`;
const reportSubject = (job: string) => `bare.${job}.report`;

interface BareStage { P: number; M: number; F: number; B: number; stage: number; job: string; url: string }

/** One stage process: bf over ready buffers, the same timer as Baton's real clock. */
async function runStage(o: BareStage): Promise<void> {
  const nc = await connect({ servers: o.url, name: `bare-${o.stage}` });
  const clock = new RealClock();
  let iteration = -1;
  let readyF: number[] = [];
  let readyB: number[] = [];
  let early: { kind: number; iteration: number; value: number }[] = [];
  let busy = false;
  let finished = 0;
  const pick = (): void => {
    if (busy) return;
    const b = readyB.shift();
    if (b !== undefined) return run('B', b);
    const f = readyF.shift();
    if (f !== undefined) run('F', f);
  };
  const run = (kind: 'F' | 'B', mb: number): void => {
    busy = true;
    const it = iteration;
    clock.setTimer(kind === 'F' ? o.F : o.B, () => {
      busy = false;
      if (kind === 'F') {
        if (o.stage < o.P - 1) nc.publish(stageSubject(o.job, o.stage + 1), message(ACTIVATION, it, mb));
        else readyB.push(mb);
      } else if (o.stage > 0) nc.publish(stageSubject(o.job, o.stage - 1), message(GRADIENT, it, mb));
      if (++finished === 2 * o.M) nc.publish(reportSubject(o.job), message(REPORT, it, o.stage));
      pick();
    });
  };
  const take = (m: { kind: number; iteration: number; value: number }): void => {
    if (m.kind === START) {
      iteration = m.iteration;
      finished = 0;
      readyF = o.stage === 0 ? Array.from({ length: o.M }, (_, i) => i) : [];
      readyB = [];
      const held = early.filter((e) => e.iteration === iteration);
      early = early.filter((e) => e.iteration > iteration);
      for (const e of held) take(e);
    } else if (m.iteration !== iteration) {
      if (m.iteration > iteration) early.push(m);
      return;
    } else if (m.kind === ACTIVATION) readyF.push(m.value);
    else if (m.kind === GRADIENT) readyB.push(m.value);
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
  // The parent ends this process by closing stdin.
  process.stdin.resume();
  process.stdin.on('end', () => void nc.close().then(() => process.exit(0)));
}

function waitFor(nc: NatsConnection, job: string, kind: number, iteration: number, count: number, timeoutMs: number): { done: Promise<void>; cancel: () => void } {
  const seen = new Set<number>();
  let resolve: () => void = () => {};
  let reject: (e: Error) => void = () => {};
  const done = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
  const timer = setTimeout(() => reject(new Error(`bare pipeline: ${seen.size} of ${count} stages answered within ${timeoutMs} ms`)), timeoutMs);
  const sub = nc.subscribe(reportSubject(job), {
    callback: (err, msg) => {
      const m = err ? null : parse(msg.data);
      if (!m || m.kind !== kind || m.iteration !== iteration) return;
      seen.add(m.value);
      if (seen.size === count) {
        clearTimeout(timer);
        sub.unsubscribe();
        resolve();
      }
    },
  });
  return { done, cancel: () => { clearTimeout(timer); sub.unsubscribe(); } };
}

/**
 * Makespans (ms) of `iterations` iterations after `warmup` unmeasured ones, for a bare
 * P-stage pipeline in P child processes over a nats-server of its own.
 */
export async function bareMakespans(o: { P: number; M: number; F: number; B: number; iterations: number; warmup: number }): Promise<number[]> {
  for (const k of ['P', 'M', 'iterations'] as const) if (!(Number.isSafeInteger(o[k]) && o[k] >= 1)) throw new Error(`bare pipeline: ${k} must be a positive integer, got ${o[k]}`);
  if (!(Number.isSafeInteger(o.warmup) && o.warmup >= 0)) throw new Error(`bare pipeline: warmup must be an integer >= 0, got ${o.warmup}`);
  for (const k of ['F', 'B'] as const) if (!(Number.isFinite(o[k]) && o[k] >= 0)) throw new Error(`bare pipeline: ${k} must be a finite number of ms >= 0, got ${o[k]}`);
  const server = await startNatsServer();
  const job = `b${process.pid}`;
  const children: ChildProcess[] = [];
  let nc: NatsConnection | null = null;
  try {
    nc = await connect({ servers: server.url, name: 'bare-coordinator' });
    const ready = waitFor(nc, job, READY, 0, o.P, 20000);
    await nc.flush();
    for (let s = 0; s < o.P; s++) {
      const child = spawn(process.execPath, [__filename, STAGE_FLAG, JSON.stringify({ ...o, stage: s, job, url: server.url })], { stdio: ['pipe', 'ignore', 'inherit'] });
      children.push(child);
    }
    await ready.done;
    const makespans: number[] = [];
    for (let it = 0; it < o.warmup + o.iterations; it++) {
      const reports = waitFor(nc, job, REPORT, it, o.P, 60000);
      await nc.flush();
      const t0 = monotonicNow();
      for (let s = 0; s < o.P; s++) nc.publish(stageSubject(job, s), message(START, it, 0));
      await reports.done;
      if (it >= o.warmup) makespans.push(monotonicNow() - t0);
    }
    return makespans;
  } finally {
    for (const c of children) c.stdin?.end();
    await Promise.all(children.map((c) => c.exitCode !== null || c.signalCode !== null ? null : new Promise((r) => {
      const kill = setTimeout(() => c.kill('SIGKILL'), 5000);
      c.once('exit', () => { clearTimeout(kill); r(null); });
    })));
    await nc?.close();
    await server.stop();
  }
}

if (require.main === module) {
  const [flag, ...args] = process.argv.slice(2);
  const fail = (what: string) => (e: Error) => {
    process.stderr.write(`${what}: ${e.message}\n`);
    process.exit(1);
  };
  if (flag === STAGE_FLAG) runStage(JSON.parse(args[0]) as BareStage).catch(fail('bare stage'));
  else if (flag === FLOOR_FLAG) {
    const [P, M, F, B] = args.map(Number);
    // As `baton run --iterations 3`: one warm-up iteration, then the mean of three.
    bareMakespans({ P, M, F, B, iterations: 3, warmup: 1 })
      .then((ms) => process.stdout.write(JSON.stringify({ makespan_ms: ms.reduce((a, b) => a + b, 0) / ms.length, makespans_ms: ms })))
      .catch(fail('bare pipeline'));
  } else fail('bare pipeline')(new Error(`run by the overhead bench (${FLOOR_FLAG} P M F B), not by hand`));
}
