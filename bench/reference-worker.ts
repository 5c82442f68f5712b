// A worker thread of the reference benchmark's pool (bench/reference-pool.ts): it measures each
// instance it is sent (bench/reference-seed.ts) and posts the result, or the error's message,
// with the instance's index.

import { parentPort } from 'worker_threads';
import { SeedTask, measureSeed } from './reference-seed';

parentPort?.on('message', (m: { index: number; task: SeedTask }) => {
  measureSeed(m.task).then(
    (result) => parentPort?.postMessage({ index: m.index, result }),
    (err: unknown) =>
      parentPort?.postMessage({ index: m.index, error: err instanceof Error ? err.message : String(err) }),
  );
});
