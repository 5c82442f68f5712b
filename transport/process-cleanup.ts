// What a process started and must not leave behind (nats-servers, stage processes, temp
// dirs): cleanups registered here run when the process exits, and on SIGINT or SIGTERM,
// after which the signal keeps its default effect (termination) unless someone else
// handles it. A cleanup must be synchronous: on 'exit' nothing asynchronous runs.

type Cleanup = () => void;

const cleanups = new Set<Cleanup>();
let installed = false;

function runAll(): void {
  for (const c of [...cleanups]) {
    cleanups.delete(c);
    try {
      c();
    } catch {
      // One failed cleanup must not keep the others from running.
    }
  }
}

function install(): void {
  if (installed) return;
  installed = true;
  process.on('exit', runAll);
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      runAll();
      if (process.listenerCount(sig) === 0) process.kill(process.pid, sig);
    });
  }
}

/** Run `cleanup` when this process ends, unless the returned function is called first. */
export function onProcessEnd(cleanup: Cleanup): () => void {
  install();
  cleanups.add(cleanup);
  return () => {
    cleanups.delete(cleanup);
  };
}
