// The publishing loop of the bus benchmark (bus-throughput.ts): a fixed number of messages
// with a bounded number in flight, timed, and failing instead of hanging when messages stop
// arriving (NATS core may drop them).

/** How long a run waits for the next message before it fails (NATS core may drop messages). */
export const STALL_MS = 30000;

/**
 * Publish `n` messages with at most `window` in flight; resolves with the elapsed seconds.
 * Rejects when no message arrives for `stallMs` while some are due, instead of waiting forever.
 */
export async function pump(
  n: number,
  window: number,
  received: () => number,
  send: (i: number) => void,
  stallMs = STALL_MS,
): Promise<number> {
  const t0 = process.hrtime.bigint();
  let seen = received();
  let since = performance.now();
  const wait = async (until: () => boolean) => {
    while (!until()) {
      await new Promise((r) => setImmediate(r));
      const now = performance.now();
      if (received() !== seen) [seen, since] = [received(), now];
      else if (now - since > stallMs)
        throw new Error(`${received()} of ${n} messages received; none for ${stallMs} ms`);
    }
  };
  for (let i = 0; i < n; i++) {
    await wait(() => i - received() < window);
    send(i);
  }
  await wait(() => received() >= n);
  return Number(process.hrtime.bigint() - t0) / 1e9;
}
