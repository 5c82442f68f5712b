// What this process's main thread is doing, in shared memory a heartbeat thread reads
// (job/heartbeat.ts): when its event loop last turned, whether it is inside a compute
// task and since when, and how many tasks it has finished. A long task holds the loop, so
// a stale loop inside a task is a busy stage; a stale loop outside one is a hung one.

/** Slots of the shared Float64Array. */
const LOOP_AT = 0;
const TASK_SINCE = 1;
const TASKS_DONE = 2;

const shared = new Float64Array(new SharedArrayBuffer(3 * Float64Array.BYTES_PER_ELEMENT));

/** The shared record, for a worker thread (pass it in workerData). */
export function activityBuffer(): SharedArrayBuffer {
  return shared.buffer as SharedArrayBuffer;
}

/** Marks the start of a task that may hold the event loop. Nested calls count once. */
let depth = 0;
export function enterTask(): void {
  if (depth++ === 0) shared[TASK_SINCE] = Date.now();
}

export function leaveTask(): void {
  if (depth === 0) return;
  if (--depth === 0) {
    shared[TASK_SINCE] = 0;
    shared[TASKS_DONE]++;
  }
}

/** Tasks finished in this process so far. */
export function tasksDone(): number {
  return shared[TASKS_DONE];
}

/** True while a task is running in this process. */
export function inTask(): boolean {
  return depth > 0;
}

/** Keeps the loop's timestamp fresh (unref'd); returns a stop function. */
export function tickLoop(everyMs: number): () => void {
  shared[LOOP_AT] = Date.now();
  const t = setInterval(() => (shared[LOOP_AT] = Date.now()), everyMs).unref();
  return () => clearInterval(t);
}

export interface Activity {
  /** ms since the event loop last turned (as of `now`). */
  loopLagMs: number;
  /** ms inside the current task, 0 when in none. */
  inTaskMs: number;
  tasksDone: number;
}

/** Reads a shared record (this process's, or one a worker was given). */
export function readActivity(buf: SharedArrayBuffer, now = Date.now()): Activity {
  const a = new Float64Array(buf);
  return {
    loopLagMs: Math.max(0, now - a[LOOP_AT]),
    inTaskMs: a[TASK_SINCE] > 0 ? Math.max(0, now - a[TASK_SINCE]) : 0,
    tasksDone: a[TASKS_DONE],
  };
}
