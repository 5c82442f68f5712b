// The floor of the overhead bench: the same pipeline with no Baton code in it. P stage
// processes on raw nats.js through one nats-server (no actors, codec, sender/receiver
// mailboxes, events or trace stream; each message is 12 raw bytes), each holding its
// stage for F or B with the same real-clock timer as Baton's emulated compute and, the
// moment it is free, running a ready task in bf order (phase B: a ready B before a
// ready F; running a B moves to phase F and an F back to B; the lowest microbatch
// first; unbounded buffers). A coordinator in the calling process starts each
// iteration as Baton's does (stage 0's start and first microbatch, then the other
// starts, then the other microbatches) and ends it when every stage has reported. Stage
// processes start with the Node flags Baton's stage processes start with. So
// this is the floor of the design (Node's event loop, nats.js through one nats-server,
// the timer), and what Baton takes over it is Baton's own.

import { spawn, ChildProcess } from 'child_process';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { monotonicNow } from '../base/clock';
import { startNatsServer } from '../transport/nats-server';
import { stageNodeFlags } from '../cli/stage-node-flags';
import {
  ACTIVATION,
  BareStage,
  BareTask,
  READY,
  REPORT,
  START,
  message,
  parse,
  reportSubject,
  runStage,
  stageSubject,
} from './bare-stage';

export { BareTask } from './bare-stage';

/** The child-process flag of one floor measurement: `--floor P M F B` prints its JSON. */
export const FLOOR_FLAG = '--floor';
const STAGE_FLAG = '--stage';

/** Resolves once every stage has sent `kind` for `iteration`; `cancel` drops the wait. */
function waitFor(
  nc: NatsConnection,
  job: string,
  kind: number,
  iteration: number,
  count: number,
  timeoutMs: number,
): { done: Promise<void>; cancel: () => void } {
  const seen = new Set<number>();
  let resolve: () => void = () => {};
  let reject: (e: Error) => void = () => {};
  const done = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
  done.catch(() => {});
  const timer = setTimeout(
    () => reject(new Error(`${seen.size} of ${count} stages answered within ${timeoutMs} ms`)),
    timeoutMs,
  );
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
  return {
    done,
    cancel: () => {
      clearTimeout(timer);
      sub.unsubscribe();
    },
  };
}

export interface BareRun {
  /** Makespan of each measured iteration, ms: the first start message to the last report. */
  makespans_ms: number[];
  /** Every task every stage ran, the warm-up iterations included. */
  tasks: BareTask[];
}

/**
 * Runs `warmup` unmeasured and then `iterations` measured iterations of a bare P-stage
 * pipeline in P child processes over a nats-server of its own.
 */
export async function runBarePipeline(o: BareOptions): Promise<BareRun> {
  checkOptions(o);
  const nodeFlags = stageNodeFlags();
  const server = await startNatsServer();
  const job = `b${process.pid}`;
  const children: ChildProcess[] = [];
  const outputs: string[] = [];
  let stopping = false;
  let died: (e: Error) => void = () => {};
  const death = new Promise<never>((_, reject) => (died = reject));
  death.catch(() => {});
  const untilDeath = <T>(p: Promise<T>) => Promise.race([p, death]);
  const waits: { cancel: () => void }[] = [];
  let nc: NatsConnection | null = null;
  try {
    nc = await connect({ servers: server.url, name: 'bare-coordinator' });
    const ready = waitFor(nc, job, READY, 0, o.P, 20000);
    waits.push(ready);
    await nc.flush();
    for (let s = 0; s < o.P; s++) {
      outputs.push('');
      children.push(
        spawnStage({ ...o, stage: s, job, url: server.url }, nodeFlags, {
          output: (d) => (outputs[s] += d),
          died: (e) => {
            if (!stopping) died(e);
          },
        }),
      );
    }
    await untilDeath(ready.done);
    const makespans = await runIterations(nc, job, o, waits, untilDeath);
    stopping = true;
    const exited = children.map(
      (c) => new Promise((r) => (c.exitCode !== null || c.signalCode !== null ? r(null) : c.once('exit', r))),
    );
    for (const c of children) c.stdin?.end();
    await Promise.all(exited);
    return { makespans_ms: makespans, tasks: tasksOf(outputs) };
  } finally {
    stopping = true;
    for (const w of waits) w.cancel();
    for (const c of children) {
      if (c.exitCode !== null || c.signalCode !== null) continue;
      c.stdin?.end();
      const kill = setTimeout(() => c.kill('SIGKILL'), 5000);
      await new Promise((r) => c.once('exit', r));
      clearTimeout(kill);
    }
    await nc?.close();
    await server.stop();
  }
}

interface BareOptions {
  P: number;
  M: number;
  F: number;
  B: number;
  iterations: number;
  warmup: number;
}

function checkOptions(o: BareOptions): void {
  for (const k of ['P', 'M', 'iterations'] as const)
    if (!(Number.isSafeInteger(o[k]) && o[k] >= 1)) throw new Error(`${k} must be a positive integer, got ${o[k]}`);
  if (!(Number.isSafeInteger(o.warmup) && o.warmup >= 0))
    throw new Error(`warmup must be an integer >= 0, got ${o.warmup}`);
  for (const k of ['F', 'B'] as const)
    if (!(Number.isFinite(o[k]) && o[k] >= 0)) throw new Error(`${k} must be a finite number of ms >= 0, got ${o[k]}`);
}

/** Starts one stage process (this file with --stage); `died` hears when it ends. */
function spawnStage(
  stage: BareStage,
  nodeFlags: readonly string[],
  on: { output: (d: string) => void; died: (e: Error) => void },
): ChildProcess {
  const child = spawn(process.execPath, [...nodeFlags, __filename, STAGE_FLAG, JSON.stringify(stage)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  child.stdout?.on('data', (d: Buffer) => on.output(d.toString()));
  child.once('exit', (code, signal) =>
    on.died(
      new Error(
        `stage ${stage.stage} (pid ${child.pid}) ended during the run (${signal ? `signal ${signal}` : `exit code ${code}`})`,
      ),
    ),
  );
  return child;
}

/** The warm-up and measured iterations, each started as Baton's coordinator starts one; the measured makespans. */
async function runIterations(
  nc: NatsConnection,
  job: string,
  o: BareOptions,
  waits: { cancel: () => void }[],
  untilDeath: <T>(p: Promise<T>) => Promise<T>,
): Promise<number[]> {
  const makespans: number[] = [];
  for (let it = 0; it < o.warmup + o.iterations; it++) {
    const reports = waitFor(nc, job, REPORT, it, o.P, 60000);
    waits.push(reports);
    await nc.flush();
    const t0 = monotonicNow();
    nc.publish(stageSubject(job, 0), message(START, it, 0));
    nc.publish(stageSubject(job, 0), message(ACTIVATION, it, 0));
    for (let s = 1; s < o.P; s++) nc.publish(stageSubject(job, s), message(START, it, 0));
    for (let mb = 1; mb < o.M; mb++) nc.publish(stageSubject(job, 0), message(ACTIVATION, it, mb));
    await untilDeath(reports.done);
    if (it >= o.warmup) makespans.push(monotonicNow() - t0);
  }
  return makespans;
}

/** The task logs the stage processes printed on stdout. */
function tasksOf(outputs: readonly string[]): BareTask[] {
  return outputs.flatMap((out, stage) =>
    (JSON.parse(out) as [number, 'F' | 'B', number, number, number][]).map(([iteration, kind, mb, start, end]) => ({
      stage,
      iteration,
      kind,
      mb,
      start,
      end,
    })),
  );
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
    runBarePipeline({ P, M, F, B, iterations: 3, warmup: 1 })
      .then((r) =>
        process.stdout.write(
          JSON.stringify({
            makespan_ms: r.makespans_ms.reduce((a, b) => a + b, 0) / r.makespans_ms.length,
            makespans_ms: r.makespans_ms,
          }),
        ),
      )
      .catch(fail('bare pipeline'));
  } else fail('bare pipeline')(new Error(`run by the overhead bench (${FLOOR_FLAG} P M F B), not by hand`));
}
