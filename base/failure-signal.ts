// A promise that only ever rejects, and the function that rejects it: what a job races
// its work against so that the first failure (an actor, a node, a signal) ends it at once.
// Its rejection is marked handled, so a job that ended otherwise leaves no unhandled one.

export interface FailureSignal {
  readonly failed: Promise<never>;
  fail(e: Error): void;
}

export function failureSignal(): FailureSignal {
  let fail: (e: Error) => void = () => {};
  const failed = new Promise<never>((_, reject) => (fail = reject));
  failed.catch(() => {});
  return { failed, fail: (e) => fail(e) };
}
