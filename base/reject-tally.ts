// A tally of refused messages: every one counted, the first few described, so a flood
// of them cannot grow a launcher's memory.

/** How many refusals a tally describes; the rest are only counted. */
export const MAX_REJECTS_DESCRIBED = 20;

export interface RejectTally {
  count: number;
  readonly first: string[];
}

export function newRejectTally(): RejectTally {
  return { count: 0, first: [] };
}

export function tallyReject(t: RejectTally, description: string): void {
  t.count++;
  if (t.first.length < MAX_REJECTS_DESCRIBED) t.first.push(description);
}
