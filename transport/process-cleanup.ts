// What a process started and must not leave behind (nats-servers, stage processes, temp
// dirs): cleanups registered here run when the process exits, and on SIGINT or SIGTERM,
// after which the signal keeps its default effect (termination). When someone else also
// listens for the signal (a launcher ending its job in order: aborts sent through the very
// server this would kill), the cleanups wait for the exit or for a second signal. A cleanup
// must be synchronous: on 'exit' nothing asynchronous runs.

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

const SIGNALS = ['SIGINT', 'SIGTERM'] as const;

function onSignal(sig: NodeJS.Signals): void {
  if (process.listenerCount(sig) > 1) return;
  endBySignal(sig);
}

/**
 * End this process by `sig` now: the cleanups run, then the signal takes its default
 * effect. (Re-raising through the listeners would not do: signal watchers do not keep the
 * event loop alive, so the process could exit before the signal is handled.)
 */
export function endBySignal(sig: NodeJS.Signals): void {
  runAll();
  for (const s of SIGNALS) process.removeListener(s, onSignal);
  process.kill(process.pid, sig);
}

function install(): void {
  if (installed) return;
  installed = true;
  process.on('exit', runAll);
  for (const sig of SIGNALS) process.on(sig, onSignal);
}

/** Run `cleanup` when this process ends, unless the returned function is called first. */
export function onProcessEnd(cleanup: Cleanup): () => void {
  install();
  cleanups.add(cleanup);
  return () => {
    cleanups.delete(cleanup);
  };
}
