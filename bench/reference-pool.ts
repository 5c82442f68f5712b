// Measures the reference benchmark's instances on `jobs` threads (bench/reference-worker.ts).
// Every instance is deterministic (virtual clock, seeded searches), so the results are the same
// for any number of jobs; they come back in the tasks' order whatever order they finish in.

import * as path from 'path';
import { Worker } from 'worker_threads';
import { SeedMeasure, SeedTask, measureSeed } from './reference-seed';

type Reply = { index: number; result?: SeedMeasure; error?: string };

/** Each task's measure, in order; `done` is called as each finishes (for progress). */
export async function measureAll(
  tasks: readonly SeedTask[],
  jobs: number,
  done: (index: number, m: SeedMeasure) => void,
): Promise<SeedMeasure[]> {
  const out: SeedMeasure[] = new Array<SeedMeasure>(tasks.length);
  if (jobs <= 1 || tasks.length <= 1) {
    for (let i = 0; i < tasks.length; i++) done(i, (out[i] = await measureSeed(tasks[i])));
    return out;
  }
  const workers = Array.from(
    { length: Math.min(jobs, tasks.length) },
    () => new Worker(path.join(__dirname, 'reference-worker.js')),
  );
  try {
    await new Promise<void>((resolve, reject) => {
      let next = 0;
      let finished = 0;
      const feed = (w: Worker) => {
        if (next < tasks.length) {
          w.postMessage({ index: next, task: tasks[next] });
          next++;
        }
      };
      for (const w of workers) {
        w.on('message', (m: Reply) => {
          if (m.error !== undefined || !m.result)
            return reject(new Error(`instance ${m.index + 1}: ${m.error ?? 'no result'}`));
          out[m.index] = m.result;
          done(m.index, m.result);
          if (++finished === tasks.length) resolve();
          else feed(w);
        });
        w.on('error', reject);
        w.on('exit', (code) => {
          if (finished < tasks.length) reject(new Error(`a measuring thread exited (${code}) before the end`));
        });
        feed(w);
      }
    });
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
  return out;
}
